package executor

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A timeoutMs or approvalTimeoutMs past what a time.Duration holds in milliseconds used to
// overflow to a negative duration: the call timed out before it was sent, the approval wait
// ended at once. Both are capped at the configured maximums instead.
func TestHugeTimeoutsCapped(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{MaxApprovalTimeout: 3 * time.Minute}})
	for _, ms := range []int64{math.MaxInt64, math.MaxInt64 / 1000, 1 << 62} {
		res := r.call("local", "fixture__slow", `{"ms":20}`, func(req *subjects.CallRequest) { req.TimeoutMs = ms })
		if res.Status != subjects.CallOK {
			t.Errorf("timeoutMs %d: got %s %+v, want ok", ms, res.Status, res.Error)
		}
	}

	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		done <- r.call("local", "fixture__wipe", `{}`, func(req *subjects.CallRequest) {
			req.ID = id
			req.TimeoutMs = math.MaxInt64
			req.ApprovalTimeoutMs = math.MaxInt64
		})
	}()
	var hint string
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				hint = ev.Message
				return true
			}
		}
		select {
		case res := <-done:
			t.Fatalf("the call ended without waiting for approval: %s %+v", res.Status, res.Error)
		default:
		}
		return false
	})
	if !strings.Contains(hint, "within 3m0s") {
		t.Errorf("needs_approval says %q: want the wait capped at MaxApprovalTimeout (3m0s)", hint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true}); err != nil || !rep.OK {
		t.Fatalf("decide: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v, want ok", res.Status, res.Error)
	}
}
