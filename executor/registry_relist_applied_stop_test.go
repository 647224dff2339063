package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A call whose expired list was re-listed waits, at admission, until the executor applied the
// new list's snapshot (registry.waitAppliedOf, in revalidate): a sequence the registry consumer
// has not reached yet, or never will (a re-list reply is outside input). When its executor
// stops meanwhile it is handed back, as a call waiting for a replay there is: another executor
// runs it. It waited on, blind to the stop, until the re-list's timeout (the process's stop
// held up by it until StopGrace), then was refused unavailable.
func TestRelistAppliedWaitHandedBackWhenExecutorStops(t *testing.T) {
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC) // (the front end)
	// The re-list's timeout and the stop's grace outlast the test's wait: only the stop can
	// end the call's wait in time.
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Log: testLogger(t),
		Dispatcher: disp, Relister: rel, ReconnectGrace: -1, RelistTimeout: 4 * waitLimit, StopGrace: 4 * waitLimit}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	waitFor(t, "executor A ready", a.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, last := publishVaultTTL(r, "f1", 1)
	waitFor(t, "vault's list expired in A", func() bool { return a.reg.view.Tool("vault", "move").State == staleness.Expired })
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "relisted-unapplied-stopping", Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	select {
	case <-rel.asked:
	case <-ctx.Done():
		t.Fatal("the expired list was not re-listed")
	}
	// A snapshot sequence far past the stream's: A waits for it until the re-list's timeout.
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f2", Sequence: last + 1_000_000, ListedAt: time.Now()}
	waitFor(t, "the call waiting for the re-list's snapshot", func() bool {
		a.reg.mu.Lock()
		defer a.reg.mu.Unlock()
		return len(a.reg.waiters[last+1_000_000]) > 0
	})
	go astop()
	waitFor(t, "executor A stopping", func() bool { return !a.Ready() })
	// vault's list, fresh, for the next executor, whose AckWait is A's: the call reaches it
	// only handed back (A's heartbeats hold it while it waits).
	publishVaultTTL(r, "f1", time.Hour.Milliseconds())
	r.startExecutor(r.managerConfig(Config{FrontEnd: new(bool), Dispatcher: disp, ReconnectGrace: -1}), r.env.Connect(t))

	select {
	case res := <-done:
		if res.Status != subjects.CallOK || disp.n.Load() != 1 {
			t.Errorf("answer %s %+v, dispatched %d times: want ok, once (handed back, run by the next executor)", res.Status, res.Error, disp.n.Load())
		}
	case <-ctx.Done():
		t.Fatal("no answer: the call waited on in the stopping executor, not handed back")
	}
}

// An approved call whose expired list is re-listed before dispatch (admit's freshness after
// the approval) waits for the re-list's snapshot to be applied; its executor stopping then
// hands it back marked approved (handBackApproved): the next executor runs it at once, nobody
// asked again. It waited on, blind to the stop, until the re-list's timeout.
func TestApprovedRelistAppliedWaitHandedBackWhenExecutorStops(t *testing.T) {
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC) // (the front end)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Log: testLogger(t),
		Dispatcher: disp, Relister: rel, ReconnectGrace: -1, RelistTimeout: 4 * waitLimit, StopGrace: 4 * waitLimit}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	waitFor(t, "executor A ready", a.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	publishDestructive := func(ttlMs int64) (snapshot uint64) {
		r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
		return r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(), TTLMs: &ttlMs,
			Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)}})
	}
	last := publishDestructive(1)
	waitFor(t, "vault's list expired in A", func() bool { return a.reg.view.Tool("vault", "move").State == staleness.Expired })

	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	asked := func(what string) {
		t.Helper()
		select {
		case <-rel.asked:
		case <-ctx.Done():
			t.Fatal("the expired list was not re-listed " + what)
		}
	}
	asked("at admission")
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", ListedAt: time.Now()}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	asked("after the approval") // (a TTL of 1 ms)
	far := last + 1_000_000     // a snapshot sequence far past the stream's
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f2", Sequence: far, ListedAt: time.Now()}
	waitFor(t, "the approved call waiting for the re-list's snapshot", func() bool {
		a.reg.mu.Lock()
		defer a.reg.mu.Unlock()
		return len(a.reg.waiters[far]) > 0
	})
	go astop()
	waitFor(t, "executor A stopping", func() bool { return !a.Ready() })
	publishDestructive(time.Hour.Milliseconds()) // vault's list, fresh, for the next executor
	r.startExecutor(r.managerConfig(Config{FrontEnd: new(bool), Dispatcher: disp, ReconnectGrace: -1}), r.env.Connect(t))

	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatalf("no answer: the approved call was not handed back, or its next delivery waited for an answer (%v)", err)
	}
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (handed back, run by the next executor)", res.Status, res.Error, disp.n.Load())
	}
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("held for approval %d times, want once", n)
	}
}
