package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalCopyProbeAnsweredByDrainingWaiter: a call delivered again finds no approval place
// free and probes for another copy waiting; the only one answering is a waiter handed back by
// its stopping executor, still draining its approvals subscription (it answers bad_request, a
// probe deciding nothing; an approval, unavailable), which then goes. The probe takes any answer for a copy that waits, so this copy waits, without a place:
// it is then the call's only waiter, and decides the call, once. (Not answered, or run twice,
// would break the call's one answer.)
func TestApprovalCopyProbeAnsweredByDrainingWaiter(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := handBackWaitingCall(t, r, ctx, time.Minute)

	// The waiter executor A handed back, its subscription not drained yet: it answers what a
	// wait handed back answers.
	w := &approvalWait{id: id, tenant: "local", decided: make(chan subjects.Approval, 1)}
	w.state.Store(approvalHandedBack)
	var probed atomic.Int32
	sub, err := r.env.NC.Subscribe(subjects.Approvals("local", id), func(m *nats.Msg) {
		rep, ok := w.answer(m.Data)
		if !ok || m.Reply == "" {
			return
		}
		probed.Add(1) // (bad_request: a probe decides nothing, whatever the wait's state)
		rep.V = subjects.Version
		data, _ := json.Marshal(rep)
		m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}

	// Executor B, every approval place taken, gets the call handed back.
	b, free := fullExecutor(t, r, Config{ApprovalTimeout: time.Minute, Workers: 1, FrontEnd: new(bool), MaxApprovalWaits: 1})
	defer free()
	waitFor(t, "B's copy probed and waiting", func() bool { return probed.Load() > 0 && r.approvalWaits(id) == 2 })
	if err := sub.Unsubscribe(); err != nil { // the draining waiter is gone
		t.Fatal(err)
	}

	rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"})
	if err != nil || !rep.OK {
		t.Fatalf("approve B's copy, the only one waiting: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("approved (its approver told OK), the call's answer is %s %+v, want ok", res.Status, res.Error)
	}
	r.waitCallsSettled(ctx)
	if n := b.Stats().Dispatched; n != 1 {
		t.Errorf("dispatched %d times, want once", n)
	}
}
