package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A call whose expired list was re-listed while the registry stream was purged waits, at
// admission, for the replay to catch up (registry.toolCaughtUp, in revalidate). When its
// executor stops meanwhile it is handed back, as a call waiting for the replay at admission is:
// another executor runs it. It waited on, blind to the stop, until the re-list's timeout (the
// process's stop held up by it until StopGrace), then was refused unavailable, or was left to
// AckWait with the process gone.
func TestRelistReplayWaitHandedBackWhenExecutorStops(t *testing.T) {
	p := newReplayPause(t)
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC) // (the front end)
	// The re-list's timeout and the stop's grace outlast the test's wait: only the stop can
	// end the call's wait in time.
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Log: testLogger(t),
		Dispatcher: disp, Relister: rel, ReconnectGrace: -1, RelistTimeout: 4 * waitLimit, StopGrace: 4 * waitLimit, hooks: p.hooks()}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	p.resumeAtCleanup(t) // (after runUntilStopped's)
	waitFor(t, "executor A ready", a.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// An event before vault's: the executor's origin, purged below.
	r.publishRegistry(subjects.RegistryStatus("pad"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "pad", Status: subjects.StatusReady})
	status, last := publishVaultTTL(r, "f1", 1)
	waitFor(t, "vault__move listed in A", func() bool { return a.reg.lookup("vault__move") != nil })
	p.at.Store(status) // the replay stops at vault's status, before its list
	waitFor(t, "vault's list expired in A", func() bool { return a.reg.view.Tool("vault", "move").State == staleness.Expired })
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "relisted-stopping", Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
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

	p.replayFrom(ctx, t, r, status)
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", Sequence: last + 1, ListedAt: time.Now()}
	select {
	case <-p.waiting:
	case res := <-done:
		t.Fatalf("answered while the replay was stopped: %s %+v, want the call to wait for the replay", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the call did not wait for the replay")
	}
	go astop() // (returns once the replay is resumed, at cleanup)
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
// the approval) while the registry stream is purged waits for the replay to catch up; its
// executor stopping then hands it back marked approved (handBackApproved, as approvedCaughtUp
// does): the next executor runs it at once, nobody asked again. It waited on, blind to the
// stop, until the re-list's timeout.
func TestApprovedRelistReplayWaitHandedBackWhenExecutorStops(t *testing.T) {
	p := newReplayPause(t)
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC) // (the front end)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Log: testLogger(t),
		Dispatcher: disp, Relister: rel, ReconnectGrace: -1, RelistTimeout: 4 * waitLimit, StopGrace: 4 * waitLimit, hooks: p.hooks()}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	p.resumeAtCleanup(t) // (after runUntilStopped's)
	waitFor(t, "executor A ready", a.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r.publishRegistry(subjects.RegistryStatus("pad"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "pad", Status: subjects.StatusReady})
	publishDestructive := func(ttlMs int64) (status, snapshot uint64) {
		status = r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
		snapshot = r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(), TTLMs: &ttlMs,
			Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)}})
		return status, snapshot
	}
	status, last := publishDestructive(1)
	waitFor(t, "vault's list expired in A", func() bool { return a.reg.view.Tool("vault", "move").State == staleness.Expired })

	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	relisted := func(rep subjects.RelistReply) {
		t.Helper()
		select {
		case <-rel.asked:
		case <-ctx.Done():
			t.Fatal("the expired list was not re-listed")
		}
		rel.reply <- rep
	}
	relisted(subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", ListedAt: time.Now()}) // (at admission)
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	p.at.Store(status) // the replay stops at vault's status, before its list
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select { // re-listed again once approved (a TTL of 1 ms)
	case <-rel.asked:
	case <-ctx.Done():
		t.Fatal("the expired list was not re-listed after the approval")
	}
	p.replayFrom(ctx, t, r, status)
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", Sequence: last + 1, ListedAt: time.Now()}
	select {
	case <-p.waiting:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for the replay")
	}
	go astop() // (returns once the replay is resumed, at cleanup)
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
