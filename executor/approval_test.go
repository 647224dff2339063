package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A destructive tool waits in needs_approval until approved or denied on the approvals subject.
func TestApproval(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	cases := []struct {
		name    string
		approve bool
		tenant  string // of the approval ("" = any)
		status  string
		code    string
	}{
		{name: "approved", approve: true, status: subjects.CallOK},
		{name: "approved for its tenant", approve: true, tenant: "local", status: subjects.CallOK},
		{name: "denied", approve: false, status: subjects.CallRefused, code: subjects.CodeDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := NewCallID()
			done := make(chan subjects.CallResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
				if err != nil {
					t.Errorf("call: %v", err)
				}
				done <- res
			}()
			// The audit stream shows the call pending.
			waitFor(t, "needs_approval audit event", func() bool {
				for _, ev := range r.auditEvents("local", id) {
					if ev.Decision == subjects.CodeNeedsApproval {
						return true
					}
				}
				return false
			})
			// Another tenant's approval is not for this call: nobody answers it.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if tc.tenant != "" {
				other, octx := context.WithTimeout(ctx, 200e6)
				_, err := r.client.Decide(other, subjects.Approval{ID: id, Tenant: "acme", Approve: true})
				octx()
				if err == nil {
					t.Errorf("an approval for tenant acme was accepted for a call of tenant local")
				}
			}
			rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Tenant: tc.tenant, Approve: tc.approve, By: "ops", Reason: "checked"})
			if err != nil || !rep.OK {
				t.Fatalf("decide: %+v %v", rep, err)
			}
			res := <-done
			if res.Status != tc.status || (res.Error == nil) != (tc.code == "") || res.Error != nil && res.Error.Code != tc.code {
				t.Fatalf("got %s %+v, want %s %s", res.Status, res.Error, tc.status, tc.code)
			}
			// Decided: nobody waits any more.
			if _, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true}); !errors.Is(err, ErrNoWaiter) {
				t.Errorf("second decision: got %v, want ErrNoWaiter", err)
			}
		})
	}
}
