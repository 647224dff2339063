package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCrashInSplitCommitKeepsTheMessagesOwnRemovals: the tools one message removes are kept
// as removed, however many, past Config.MaxRemoved (the package doc). A crash inside the split
// commit of such a message leaves some of its removed records stored; applying the message
// again must not take them for old records to forget: the replica ends with the content
// (Digest) and the "removed" answers of one that applied the message whole.
func TestCrashInSplitCommitKeepsTheMessagesOwnRemovals(t *testing.T) {
	var all []json.RawMessage
	for i := range 8 {
		all = append(all, tool(fmt.Sprintf("t%d", i), fmt.Sprintf("tool number %d", i)))
	}
	before := []any{status("s", subjects.StatusReady), snapshot("s", "d", all...)}
	last := snapshot("s", "d", all[0]) // removes 7 tools, past a MaxRemoved of 4
	open := func() *direct {
		d := openDirect(t, nil)
		d.cfg.MaxRemoved = 4
		return d
	}
	ref := open()
	ref.apply(before...)
	ref.apply(last)
	want := ref.digest()

	probe := open()
	probe.apply(before...)
	subject, data := eventMsg(t, last)
	ev, err := decodeEvent(subject, data)
	if err != nil {
		t.Fatal(err)
	}
	probe.applying = probe.seq + 1
	ws, _, err := probe.plan(ev)
	if err != nil {
		t.Fatal(err)
	}
	ws, _ = probe.forgetRemoved(ws, nil)

	for cut := 1; cut < len(ws); cut++ {
		r := open()
		r.apply(before...)
		txn := r.db.NewTransaction(true)
		for _, w := range ws[:cut] {
			if w.Value == nil {
				err = txn.Delete(w.Key)
			} else {
				err = txn.Set(w.Key, w.Value)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.reset()
		if err := r.load(); err != nil {
			t.Fatal(err)
		}
		r.mu.Unlock()
		r.apply(last)
		if got := r.digest(); got != want {
			t.Errorf("crash after %d of %d writes: digest differs from a replica that applied the message whole", cut, len(ws))
		}
		for i := 1; i < len(all); i++ {
			n := fmt.Sprintf("s__t%d", i)
			g := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{n}})
			w := ref.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{n}})
			if (g.Error == nil) != (w.Error == nil) || g.Error != nil && g.Error.Reason != w.Error.Reason {
				t.Errorf("crash after %d of %d writes: details %s = %+v, want %+v", cut, len(ws), n, g.Error, w.Error)
			}
		}
	}
}

// TestStreamPurgedWhileFollowing: a registry stream purged while a replica follows it lost
// events the replica was built from, as when it is purged while the replica is stopped
// (TestStreamPurgedBehindPosition): a replica started after the purge has none of what they
// said, so the running replica must drop it too, rather than answer differently from the other
// replicas of its queue group until its next restart.
func TestStreamPurgedWhileFollowing(t *testing.T) {
	old := originCheckEvery
	originCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { originCheckEvery = old }) // registered first: runs after the replicas stopped
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	running := startReplica(t, env, filepath.Join(t.TempDir(), "r"), nil, nil)
	waitSeq(t, running.Catalog, seq)

	ctx := context.Background()
	s, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	seq = publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
	fresh := startReplica(t, env, "", nil, nil)
	waitSeq(t, fresh.Catalog, seq)
	want := digestOf(t, fresh.Catalog)
	waitFor(t, "the running replica to hold what a replica built now holds", func() bool {
		return running.Seq() >= seq && running.Ready() && digestOf(t, running.Catalog) == want
	})
}
