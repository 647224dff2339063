package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// approvalWaits counts the needs_approval events of a call.
func (r *rig) approvalWaits(id string) int {
	n := 0
	for _, ev := range r.auditEvents("local", id) {
		if ev.Decision == subjects.CodeNeedsApproval {
			n++
		}
	}
	return n
}

// TestApprovalDeadlineKeptAcrossHandBack: a call waiting for approval is handed back when its
// executor stops, and delivered again. Each delivery waited a fresh approvalTimeoutMs (and
// asked the approvers again): stopping executors now and then (a rolling restart) kept a call
// waiting far longer than its approval timeout, forever if often enough. The deadline counts
// from the call's first needs_approval: a delivery past it is answered approval_timeout without
// asking again.
func TestApprovalDeadlineKeptAcrossHandBack(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	// The approval timeout is shorter than the hand-back's delay: it has passed when the call is
	// delivered again.
	fast := Config{ApprovalTimeout: handBackDelay / 2}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := handBackWaitingCall(t, r, ctx, fast.ApprovalTimeout)

	r.startExecutor(r.managerConfig(Config{ApprovalTimeout: fast.ApprovalTimeout, FrontEnd: new(bool)}), r.env.Connect(t))
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout {
		t.Errorf("got %s %+v, want refused approval_timeout", res.Status, res.Error)
	}
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("the call was held for approval %d times, want once: its approval timeout had passed when it was delivered again", n)
	}
}

// TestApprovalTwoDeliveriesRunOnce: an executor's heartbeats are lost (its NATS connection
// half-down) for longer than AckWait while its call waits for approval, so JetStream delivers
// the call again to another executor, and both wait on the one approvals subject. One
// approval reached both: both went on, one ran the tool under its claim and the other, finding
// the claim of its own request, stored outcome_unknown at once. The tool ran, and the caller
// was told its outcome was unknown. One delivery takes the decision; the other waits for its
// answer.
func TestApprovalTwoDeliveriesRunOnce(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	// How each delivery of the call goes on once its approval wait is decided: with its own
	// decision, or with the outcome another delivery recorded.
	type decision struct {
		delivery  uint64
		elsewhere bool
	}
	decisions := make(chan decision, 4)
	base := Config{AckWait: time.Second, Approve: []string{"ticketing__createIssue"}, Dispatcher: hold, Relister: r.mgr,
		hooks: testHooks{approvalDecided: func(id string, delivery uint64, elsewhere bool) {
			if id == "twice" {
				decisions <- decision{delivery, elsewhere}
			}
		}}}
	front := base
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A reaches NATS through a proxy that loses its progress heartbeats.
	px, nc := connectLosingHeartbeats(t, r)
	ca := base
	ca.Workers, ca.FrontEnd = 1, new(bool)
	r.startExecutor(ca, nc)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "twice", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval on A", func() bool { return r.approvalWaits(req.ID) == 1 })

	// Executor B takes the call delivered again after AckWait.
	cb := base
	cb.Workers, cb.FrontEnd = 1, new(bool)
	r.startExecutor(cb, r.env.Connect(t))
	waitFor(t, "needs_approval on B too", func() bool { return r.approvalWaits(req.ID) == 2 })
	px.drop.Store(false)

	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	// Both deliveries got the approval: one goes on with its own decision (and runs the call),
	// the other with the outcome recorded (it waits for that one's answer; going on as approved
	// of its own, it found the claim and stored outcome_unknown at once).
	var own, elsewhere []uint64
	for range 2 {
		select {
		case d := <-decisions:
			if d.elsewhere {
				elsewhere = append(elsewhere, d.delivery)
			} else {
				own = append(own, d.delivery)
			}
		case <-ctx.Done():
			t.Fatalf("the deliveries did not both decide (own %v, elsewhere %v)", own, elsewhere)
		}
	}
	if len(own) != 1 || len(elsewhere) != 1 {
		t.Fatalf("deliveries deciding on their own: %v, taking the recorded outcome: %v; want one each", own, elsewhere)
	}
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the approved call was never dispatched")
	}
	// An approver whose answer was lost approves again: nothing more is decided.
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Approve: true, By: "ops"}); err == nil && rep.OK {
		t.Errorf("a second approval of a call approved already was told OK")
	}
	hold.letGo()

	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the call's answer is %s %+v, want ok: it ran once", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	r.waitCallsSettled(ctx)
}

// handBackWaitingCall starts a front end and an executor A with approval timeout timeout,
// submits a call of fixture__wipe (approval-gated), waits until A holds it in needs_approval,
// then stops A, which hands the waiting call back to the work queue. It returns the call's id.
func handBackWaitingCall(t *testing.T, r *rig, ctx context.Context, timeout time.Duration) string {
	t.Helper()
	r.startExecutor(Config{ApprovalTimeout: timeout, NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{ApprovalTimeout: timeout, Workers: 1, FrontEnd: new(bool), Log: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	actx, astop := context.WithCancel(context.Background())
	adone := make(chan error, 1)
	go func() { adone <- a.Run(actx) }()
	stopped := false
	defer func() {
		if !stopped {
			astop()
			<-adone
		}
	}()
	waitFor(t, "executor A ready", a.Ready)
	waitFor(t, "fixture__wipe listed", func() bool { return a.reg.lookup("fixture__wipe") != nil })
	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	astop() // hands the waiting call back
	stopped = true
	if err := <-adone; err != nil {
		t.Errorf("executor A: %v", err)
	}
	return id
}
