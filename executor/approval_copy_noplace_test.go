package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalCopyWithoutWaitPlace: an executor's heartbeats are lost past AckWait while its
// call waits for approval, and JetStream delivers the call again to an executor whose places
// for calls waiting for approval are all taken. That copy was refused rate_limited ("nothing
// was run: try again later") and the refusal stored as the call's answer, while the first copy
// still waited: approved, it ran the tool. The caller, told to try again, ran it twice.
func TestApprovalCopyWithoutWaitPlace(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	base := Config{AckWait: time.Second, Approve: []string{"ticketing__createIssue"}, Dispatcher: hold, Relister: r.mgr}
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
	req := subjects.CallRequest{ID: "copy-noplace", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval on A", func() bool { return r.approvalWaits(req.ID) == 1 })

	// Executor B, every place for calls waiting for approval taken, gets the call delivered
	// again after AckWait.
	cb := base
	cb.Workers, cb.FrontEnd, cb.MaxApprovalWaits = 1, new(bool), 1
	_, free := fullExecutor(t, r, cb)
	defer free()
	// B takes its copy: it waits too (or, before, refused it rate_limited).
	waitFor(t, "B's copy decided", func() bool {
		for _, ev := range r.auditEvents("local", req.ID) {
			if ev.Decision == subjects.CodeRateLimited {
				return true
			}
		}
		return r.approvalWaits(req.ID) == 2
	})
	px.drop.Store(false)

	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the approved call was never dispatched")
	}
	hold.letGo()
	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("approved (its approver told OK) and run, but the call's answer is %s %+v, want ok", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	r.waitCallsSettled(ctx)
}
