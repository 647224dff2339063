package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/subjects"
)

// The registry stream purged whole, then deleted and created again, while registrysync and an
// executor run: a catalog replica and an executor started after each know the server's tools
// again, and a call of one succeeds, without a restart (registrysync published again only
// the lists that changed: every new replica knew none, and calls were answered not_found). The
// executor that ran through it holds what the stream holds, as a new one would: the tools
// registrysync publishes again, not those of a server nobody publishes any more (it kept
// those for good), nor, on the stream created again, nothing of the lists published again (its
// consumer went on past the new stream's first events).
func TestRegistryPurgedOrRecreatedWhileRunning(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 100 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })
	r := startRig(t, rigOptions{heartbeatEvery: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	const tool, ghost = "ticketing__listIssues", "ghost__boo"
	// A server no registrysync runs any more (its process gone without a word).
	publishGhost := func() {
		t.Helper()
		data, _ := json.Marshal(subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "ghost", Kind: subjects.KindTools,
			Fingerprint: "g1", ListedAt: time.Now().UTC(), Pages: 1,
			Items: []json.RawMessage{json.RawMessage(`{"name":"boo","inputSchema":{"type":"object"}}`)}})
		if _, err := r.env.JS.Publish(ctx, subjects.RegistrySnapshot("ghost", subjects.KindTools), data); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the executor to know "+ghost, func() bool { return r.ex.reg.lookup(ghost) != nil })
	}
	check := func(after string) {
		t.Helper()
		cat, err := indexer.Open(indexer.Config{InMemory: true, Log: testLogger(t).With().Str("role", "indexer").Logger()})
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cat.Follow(cctx, r.env.JS) }()
		defer func() {
			ccancel()
			if err := <-done; err != nil {
				t.Errorf("indexer: %v", err)
			}
			cat.Close()
		}()
		waitFor(t, "a catalog replica started "+after+" to list "+tool, func() bool {
			_, _, ok := cat.Lookup(tool)
			return ok
		})
		ex := r.startExecutor(r.managerConfig(Config{}), r.env.NC)
		waitFor(t, "an executor started "+after+" to know "+tool, func() bool { return ex.reg.lookup(tool) != nil })
		waitFor(t, "the running executor to forget "+ghost+" "+after, func() bool { return r.ex.reg.lookup(ghost) == nil })
		if _, _, ok := cat.Lookup(ghost); ok {
			t.Errorf("a catalog replica started %s lists %s", after, ghost)
		}
		for _, e := range []*Executor{ex, r.ex} {
			waitFor(t, "every executor to hold "+tool+" usable "+after, func() bool {
				return e.reg.lookup(tool) != nil && e.reg.view.Tool("ticketing", "listIssues").State.Usable()
			})
		}
		if res := r.call("local", tool, `{"limit":1}`); res.Error != nil {
			t.Errorf("call of %s %s: %s %+v", tool, after, res.Status, res.Error)
		}
	}

	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	publishGhost()
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the purge")

	publishGhost()
	if err := r.env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a moment without the stream
	if err := subjects.EnsureStreams(ctx, r.env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	check("on the stream created again")
}
