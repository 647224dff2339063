package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// The front end's waiting calls are shared by every tenant: one tenant's calls answered on
// non-inbox subjects (the front end waits for their answers) or resends filled all 16,384, and
// every other tenant's exec requests were refused. A tenant now holds at most execTenantShare.
func TestExecWaitingShareOfOneTenant(t *testing.T) {
	old := execTenantShare
	execTenantShare = 2
	t.Cleanup(func() { execTenantShare = old })
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.waitTool("fixture__wipe")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	// Two acme calls that wait for approval, answered on a subject that is no inbox: the
	// front end holds each until its answer.
	ids := []string{NewCallID(), NewCallID()}
	for _, id := range ids {
		data, _ := json.Marshal(subjects.CallRequest{V: 1, ID: id, Tool: "fixture__wipe"})
		if err := r.env.NC.PublishRequest(subjects.Exec("acme"), "acme.answers."+id, data); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "needs_approval of "+id, func() bool {
			for _, ev := range r.auditEvents("acme", id) {
				if ev.Decision == subjects.CodeNeedsApproval {
					return true
				}
			}
			return false
		})
	}

	res, err := r.client.Call(ctx, "acme", subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	if err != nil || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("a third acme call: %v %+v, want rate_limited", err, res.Error)
	}
	res, err = r.client.Call(ctx, "globex", subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	if err != nil || res.Status != subjects.CallOK {
		t.Errorf("a globex call while acme holds its share: %v %s %+v", err, res.Status, res.Error)
	}

	for _, id := range ids {
		if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Tenant: "acme", Approve: false}); err != nil || !rep.OK {
			t.Fatalf("deny %s: %+v %v", id, rep, err)
		}
	}
	// Given back once answered.
	waitFor(t, "acme's share given back", func() bool {
		res, err := r.client.Call(ctx, "acme", subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		return err == nil && res.Status == subjects.CallOK
	})
}
