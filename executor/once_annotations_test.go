package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// vaultSnapshot publishes a tools list of the hand-made server "vault" holding one definition.
func (r *rig) vaultSnapshot(fp, def string) {
	r.t.Helper()
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Items: []json.RawMessage{json.RawMessage(def)}})
}

// A side-effecting call whose executor died after dispatching it is not run again when its
// tool is re-listed read-only (or idempotent) before the call is delivered again: the claim
// says an earlier attempt was dispatched as a side-effecting call, and that decides. The
// redelivery used to skip the claim (the tool now being retry-safe) and dispatch it again.
func TestRedeliveryAfterRelistReadOnlyNotRunAgain(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	fast := Config{AckWait: time.Second, MaxDeliver: 5}

	front := fast
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	rec := &recordingDispatcher{}
	ncA := r.env.Connect(t)
	var exA *Executor
	stored := &hookedDispatcher{inner: rec, before: func() {
		// A dies once its audit events are stored: none is still waiting for its PubAck
		// (which would time out, and log, after the test).
		waitFor(t, "executor A's audit events stored", func() bool { return exA.audit.pending() == 0 })
	}}
	crash := &crashingDispatcher{inner: stored, nc: ncA, dispatched: make(chan struct{}), release: make(chan struct{})}
	a := fast
	a.Dispatcher, a.Relister = crash, r.mgr
	a.FrontEnd = new(bool)
	exA = r.startExecutor(a, ncA)
	t.Cleanup(func() { close(crash.release) })

	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	r.vaultSnapshot("f1", `{"name":"move","inputSchema":{"type":"object"}}`) // no hints: side effects
	r.waitTool("vault__move")

	done := make(chan subjects.CallResult, 1)
	go func() {
		done <- r.call("local", "vault__move", `{}`, func(q *subjects.CallRequest) { q.ID = "move-once" })
	}()
	select {
	case <-crash.dispatched:
	case res := <-done:
		t.Fatalf("answered before executor A dispatched: %s %+v", res.Status, res.Error)
	case <-time.After(waitLimit):
		t.Fatal("executor A never dispatched")
	}

	// The server now says move is read-only; executor B knows only that definition.
	r.vaultSnapshot("f2", `{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)
	b := fast
	b.Dispatcher, b.Relister = rec, r.mgr
	b.FrontEnd = new(bool)
	eb := r.startExecutor(b, r.env.Connect(t))
	waitFor(t, "executor B has the read-only definition", func() bool {
		tl := eb.reg.lookup("vault__move")
		return tl != nil && tl.ReadOnly
	})

	res := <-done
	rec.mu.Lock()
	n := len(rec.reqs)
	rec.mu.Unlock()
	if n != 1 {
		t.Errorf("dispatched %d times, want 1: the call was claimed as side-effecting and dispatched", n)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %s %+v, want outcome_unknown", res.Status, res.Error)
	}
}

// hookedDispatcher runs before ahead of each dispatch of inner.
type hookedDispatcher struct {
	inner  Dispatcher
	before func()
}

func (d *hookedDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.before()
	return d.inner.Dispatch(ctx, server, req)
}

// unknownOnceDispatcher answers its first dispatch outcome_unknown (the connection failed after
// sending: the call may have run), after running first; every other one ok.
type unknownOnceDispatcher struct {
	first func()
	mu    sync.Mutex
	n     int
}

func (d *unknownOnceDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	if n == 1 {
		d.first()
		return subjects.DispatchReply{V: 1, Error: &subjects.Error{Code: subjects.CodeOutcomeUnknown, Message: "the connection failed after the call was sent; it may have run"}}
	}
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

func (d *unknownOnceDispatcher) dispatches() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// An unknown outcome of a read-only tool is retried — unless the tool was re-listed in the
// meantime without its read-only and idempotent hints: the definition it runs under now may
// have side effects, and the first attempt may have run it. The retry used to go by the
// definition admitted before the first attempt and dispatched the now side-effecting tool again
// (unclaimed, unapproved).
func TestRetryAfterRelistWithSideEffectsNotDispatched(t *testing.T) {
	disp := &unknownOnceDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp}})
	disp.first = func() {
		r.vaultSnapshot("f2", `{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)
		waitFor(t, "the new definition applied", func() bool {
			tl := r.ex.reg.lookup("vault__move")
			return tl != nil && !tl.retrySafe()
		})
	}
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	r.vaultSnapshot("f1", `{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)
	r.waitTool("vault__move")

	res := r.call("local", "vault__move", `{}`)
	if n := disp.dispatches(); n != 1 {
		t.Errorf("dispatched %d times, want 1: the tool has side effects now", n)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %s %+v, want outcome_unknown (the first attempt may have run)", res.Status, res.Error)
	}
}
