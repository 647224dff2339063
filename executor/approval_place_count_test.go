package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestHandedBackApprovedCallsPlaces: several approved calls handed back at once (their
// executor stopped while they waited for a concurrency slot) reach an executor with one place
// for calls waiting for approval. One takes it (best effort), the others go on without one:
// each runs (its approver was told OK), and every place is given back once, none twice (an
// endWait without a taken place would block on the semaphore, or free another call's place).
func TestHandedBackApprovedCallsPlaces(t *testing.T) {
	const n = 3
	limits := Limits{Tools: map[string]Rate{"fixture__wipe": {Concurrency: 1}}}
	busy := make(chan string, 64)
	hook := testHooks{slotBusy: func(id string) {
		select {
		case busy <- id:
		default:
		}
	}}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: n, MaxApprovalWaits: n, FrontEnd: new(bool), Limits: limits, Log: testLogger(t), hooks: hook}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	waitFor(t, "executor A ready", a.Ready)
	waitFor(t, "fixture__wipe listed", func() bool { return a.reg.lookup("fixture__wipe") != nil })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__wipe", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}
	var ids []string
	for range n {
		id := NewCallID()
		ids = append(ids, id)
		if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", TimeoutMs: 5000}); err != nil {
			t.Fatal(err)
		}
	}
	waiting := map[string]bool{}
	for _, id := range ids {
		waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
		if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
			t.Fatalf("approve: %+v %v", rep, err)
		}
	}
	for len(waiting) < n {
		select {
		case id := <-busy:
			waiting[id] = true
		case <-ctx.Done():
			t.Fatalf("%d of the approved calls waited for their slot", len(waiting))
		}
	}
	astop() // hands the calls back; the slot stays busy

	b := r.startExecutor(r.managerConfig(Config{AckWait: time.Second, FrontEnd: new(bool), Limits: limits, Workers: n, MaxApprovalWaits: 1}), r.env.Connect(t))
	held.release(ctx)
	for _, id := range ids {
		res, err := r.client.Await(ctx, "local", id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != subjects.CallOK {
			t.Errorf("approved call %s handed back: %s %+v, want ok", id, res.Status, res.Error)
		}
	}
	r.waitCallsSettled(ctx)
	waitFor(t, "places given back", func() bool { return len(b.approvalWaits) == 0 })
}

// TestPendingHandedBackWithoutWaitPlace: a call handed back while it waited for approval (no
// outcome recorded, its approval timeout not passed) to an executor whose places are all taken
// would wait for a human again: it is refused rate_limited, asking nobody a second time (one
// needs_approval only), and every place is given back.
func TestPendingHandedBackWithoutWaitPlace(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := handBackWaitingCall(t, r, ctx, time.Minute)

	b, free := fullExecutor(t, r, Config{ApprovalTimeout: time.Minute, FrontEnd: new(bool), Workers: 2, MaxApprovalWaits: 1})
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("the waiting call handed back to an executor with no place free: %s %+v, want refused rate_limited", res.Status, res.Error)
	}
	r.waitCallsSettled(ctx)
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("%d needs_approval events, want 1 (nobody asked again)", n)
	}
	free()
	if n := len(b.approvalWaits); n != 0 {
		t.Errorf("%d places still taken on B", n)
	}
}
