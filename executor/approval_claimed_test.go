package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalNotAskedForClaimedCall: an executor dies after dispatching an approved
// side-effecting call, before its result is recorded. The redelivered call can never run again
// (its claim holds: outcome_unknown), yet it waited in needs_approval once more: a human was
// asked to approve, in the audit, a call that had run, whatever they decided changed nothing,
// and the caller waited up to the approval timeout (5 min by default) for outcome_unknown. A
// claimed call is answered from its claim without asking anyone again.
func TestApprovalNotAskedForClaimedCall(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	fast := Config{AckWait: time.Second, MaxDeliver: 5, ApprovalTimeout: 3 * time.Second}

	front := fast
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A dies right after dispatch.
	ncA := r.env.Connect(t)
	crash := &crashingDispatcher{inner: r.mgr, nc: ncA, dispatched: make(chan struct{}), release: make(chan struct{})}
	a := fast
	a.Dispatcher, a.Relister = crash, r.mgr
	a.FrontEnd = new(bool)
	r.startExecutor(a, ncA)
	t.Cleanup(func() { close(crash.release) })
	r.waitTool("fixture__wipe")

	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe"})
		if err != nil {
			res.Error = &subjects.Error{Code: "client", Message: err.Error()}
		}
		done <- res
	}()
	waits := func() int {
		n := 0
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				n++
			}
		}
		return n
	}
	waitFor(t, "needs_approval", func() bool { return waits() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-crash.dispatched:
	case <-time.After(waitLimit):
		t.Fatal("executor A never dispatched")
	}

	// Executor B takes the redelivered call.
	b := r.managerConfig(fast)
	b.FrontEnd = new(bool)
	r.startExecutor(b, r.env.Connect(t))
	res := <-done
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Fatalf("got %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	if n := waits(); n != 1 {
		t.Errorf("the call waited for approval %d times, want once: its redelivery was claimed and cannot run again", n)
	}
	for _, ev := range r.auditEvents("local", id) {
		if ev.Decision == subjects.CodeApprovalTimeout {
			t.Errorf("the redelivered call timed out waiting for an approval it did not need: %+v", ev)
		}
	}
}
