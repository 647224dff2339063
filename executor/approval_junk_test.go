package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// An approval must say "approve": true or false. A message without it (or with null) used to
// decode as approve: false and deny the call; it is refused bad_request and decides nothing:
// the call keeps waiting, and a real decision afterwards decides it.
func TestApprovalJunkDecidesNothing(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
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
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	junk := []string{
		`{}`,
		`{"v":1,"id":"` + id + `"}`,
		`{"v":1,"id":"` + id + `","approve":null,"by":"mallory"}`,
		`{"v":1,"id":"` + id + `","approve":"yes"}`,
		`{"v":1,"id":"` + id + `","approve":1}`,
		`{"v":1,"id":"` + id + `","Approve":"false"}`,
		`{"v":1,"id":"` + id + `","approve":false,"Approve":true}`,
		`{"v":1,"id":"` + id + `","approve":true,"approve":false}`,
		`[true]`,
		`junk`,
	}
	for _, j := range junk {
		m, err := r.env.NC.Request(subjects.Approvals("local", id), []byte(j), waitLimit)
		if err != nil {
			t.Fatalf("%s: %v", j, err)
		}
		var rep subjects.ApprovalReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatalf("%s: answer %q: %v", j, m.Data, err)
		}
		if rep.OK || rep.Error == nil || rep.Error.Code != subjects.CodeBadRequest {
			t.Errorf("%s: got %+v, want bad_request", j, rep)
		}
		select {
		case res := <-done:
			t.Fatalf("%s decided the call: %s %+v", j, res.Status, res.Error)
		default:
		}
	}
	// Still waiting: a real approval decides it.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"})
	if err != nil || !rep.OK {
		t.Fatalf("decide: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v, want ok", res.Status, res.Error)
	}
}
