package executor

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A call waiting for approval holds its worker, and workers serve every tenant: calls waiting
// for approval (up to an hour each) took every worker, and nobody's calls ran. Past
// MaxApprovalWaits (default half the workers) a call that needs approval is refused
// rate_limited at once, and calls that need none are still served.
func TestApprovalWaitsBounded(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ex := r.startExecutor(r.managerConfig(Config{Workers: 4}), r.env.NC)
	r.waitTool("fixture__wipe")
	if got := cap(ex.approvalWaits); got != 2 {
		t.Fatalf("MaxApprovalWaits of 4 workers = %d, want 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	ids := []string{NewCallID(), NewCallID()}
	done := make(chan subjects.CallResult, len(ids))
	for _, id := range ids {
		go func() {
			res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe"})
			if err != nil {
				t.Errorf("call: %v", err)
			}
			done <- res
		}()
	}
	for _, id := range ids {
		waitFor(t, "needs_approval of "+id, func() bool {
			for _, ev := range r.auditEvents("local", id) {
				if ev.Decision == subjects.CodeNeedsApproval {
					return true
				}
			}
			return false
		})
	}

	res := r.call("local", "fixture__wipe", `{}`)
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs <= 0 {
		t.Errorf("a third call needing approval with two waiting: %s %+v, want refused rate_limited with retryAfterMs", res.Status, res.Error)
	}
	for i := range 3 { // more than the workers left: each is served
		if res := r.call("local", "fixture__echo", `{"text":"served"}`); res.Status != subjects.CallOK {
			t.Fatalf("call %d needing no approval while two wait: %s %+v", i, res.Status, res.Error)
		}
	}

	for _, id := range ids {
		if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: false}); err != nil || !rep.OK {
			t.Fatalf("deny %s: %+v %v", id, rep, err)
		}
	}
	for range ids {
		if res := <-done; res.Error == nil || res.Error.Code != subjects.CodeDenied {
			t.Errorf("denied call: %s %+v", res.Status, res.Error)
		}
	}
	// The waits are given back: a call needing approval waits again.
	id := NewCallID()
	go r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe"})
	waitFor(t, "needs_approval after the waits ended", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: false}); err != nil || !rep.OK {
		t.Fatalf("deny %s: %+v %v", id, rep, err)
	}
}
