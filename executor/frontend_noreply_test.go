package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestFrontEndNoReplyHoldsNothing: a call published to the exec subject without a reply
// subject (a plain publish: nobody to answer) was persisted, then the front end waited for its
// answer all the same — a goroutine, a subscription and one of the front end's waiting calls
// (of its tenant's quarter) held until the call ended, minutes for one waiting for approval —
// to send it nowhere. Persisted, it is the worker's: the front end holds nothing, and the
// answer is on the results stream.
func TestFrontEndNoReplyHoldsNothing(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	id := NewCallID()
	data, err := json.Marshal(subjects.CallRequest{V: subjects.Version, ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.env.NC.Publish(subjects.Exec("local"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	waitFor(t, "the front end holds no waiting call", func() bool { return len(r.ex.execSem) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: false}); err != nil || !rep.OK {
		t.Fatalf("deny: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", id)
	if err != nil || res.Error == nil || res.Error.Code != subjects.CodeDenied {
		t.Fatalf("answer: %+v %v; want denied", res, err)
	}
}
