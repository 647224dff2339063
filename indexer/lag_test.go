package indexer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestLagWhileStuck: Stats.StreamLast follows the registry stream's end even while the replica
// applies nothing (here: its catalog lock held, as by a stuck write), so StreamLast − Seq, the
// lag the metrics export, grows; it falls back to 0 once the replica catches up.
func TestLagWhileStuck(t *testing.T) {
	env, r, seq := caughtUpReplica(t)
	if st := r.Stats(); st.StreamLast != seq || st.Seq != seq {
		t.Fatalf("caught up: seq %d, stream last %d; want both %d", st.Seq, st.StreamLast, seq)
	}

	r.mu.Lock() // a stuck replica: no message can be applied
	locked := true
	defer func() {
		if locked {
			r.mu.Unlock()
		}
	}()
	last := publish(t, env.JS, status("solo", "ready"), snapshot("solo", "", tool("only_tool", "the only tool")))
	waitFor(t, "the stuck replica to see the stream's end", func() bool { return r.streamLast.Load() == last })
	if got := r.Seq(); got >= last {
		t.Fatalf("applied up to %d while stuck", got)
	}
	r.mu.Unlock()
	locked = false
	waitSeq(t, r.Catalog, last)
	if st := r.Stats(); st.StreamLast != st.Seq {
		t.Fatalf("caught up again: seq %d, stream last %d", st.Seq, st.StreamLast)
	}
}

// TestLagAfterStreamRecreated: a replica that took every message of its stream through a
// sequence (Stats.Lag counts none deleted up to it) and then dropped its catalog, the stream
// recreated, counts the lag of the new stream's messages from its new position: the old
// stream's sequence said nothing of the new one's messages. Before, a replica stuck behind
// them read a lag of 0 up to the old stream's last sequence (an alert on the lag never fired).
func TestLagAfterStreamRecreated(t *testing.T) {
	env, r, seq := caughtUpReplica(t)

	ctx := context.Background()
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	first := publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
	if first >= seq-2 {
		t.Fatalf("the recreated stream is at %d, want below %d", first, seq-2)
	}
	waitFor(t, "the catalog rebuilt from the recreated stream", func() bool {
		st := r.Stats()
		return r.Ready() && st.Seq == first && st.Tools == 1
	})

	r.mu.Lock() // a stuck replica: no message can be applied
	locked := true
	defer func() {
		if locked {
			r.mu.Unlock()
		}
	}()
	last := publish(t, env.JS, status("other", subjects.StatusReady), snapshot("other", "", tool("new_tool", "a new tool")))
	waitFor(t, "the stuck replica to see the stream's end", func() bool { return r.streamLast.Load() == last })
	if s, l, lag := r.position(); s >= last || lag != l-s {
		t.Errorf("stuck at %d behind %d: lag %d, want %d", s, l, lag, l-s)
	}
	r.mu.Unlock()
	locked = false
	waitSeq(t, r.Catalog, last)
	if st := r.Stats(); st.Lag != 0 {
		t.Errorf("caught up: lag %d (seq %d, stream last %d)", st.Lag, st.Seq, st.StreamLast)
	}
}

// caughtUpReplica starts a replica, on disk, that has applied the demo events, and that reads
// the stream's info every 20 ms (originCheckEvery); seq is the last event's sequence.
func caughtUpReplica(t *testing.T) (*natstest.Env, *replica, uint64) {
	t.Helper()
	old := originCheckEvery
	originCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { originCheckEvery = old })
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, filepath.Join(t.TempDir(), "r"), nil, nil)
	waitSeq(t, r.Catalog, seq)
	return env, r, seq
}
