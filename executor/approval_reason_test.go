package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalReasonCapped: the by and reason of an approval go into the call's answer (denied
// by BY: REASON). They had no bound but NATS's max_payload: a 2 MiB reason (of '<', which JSON
// writes in six bytes) made an answer the results stream cannot take, so the denial was never
// stored: the call went back to the queue and waited for approval again, its approver told OK,
// until its deliveries ran out. They are cut, and the denial is the call's answer.
func TestApprovalReasonCapped(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			res.Error = &subjects.Error{Code: "client", Message: err.Error()}
		}
		done <- res
	}()
	needsApproval := func() int {
		n := 0
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				n++
			}
		}
		return n
	}
	waitFor(t, "needs_approval audit event", func() bool { return needsApproval() > 0 })
	deny := `{"v":1,"id":"` + id + `","approve":false,"by":"ops","reason":"` + strings.Repeat("<", 2<<20) + `"}`
	m, err := r.env.NC.Request(subjects.Approvals("local", id), []byte(deny), waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	var rep subjects.ApprovalReply
	if err := json.Unmarshal(m.Data, &rep); err != nil || !rep.OK {
		t.Fatalf("deny: %s %v", m.Data, err)
	}
	var res subjects.CallResult
	waitFor(t, "the answer, or the call waiting for approval again", func() bool {
		select {
		case res = <-done:
			return true
		default:
			return needsApproval() > 1
		}
	})
	if res.Error == nil {
		t.Fatalf("the denial was not stored: the call waits for approval again")
	}
	if res.Error.Code != subjects.CodeDenied || !strings.HasPrefix(res.Error.Message, "denied by ops: <<<") || len(res.Error.Message) > 8<<10 {
		t.Errorf("got %s %s (%d bytes), want denied, cut", res.Status, res.Error.Code, len(res.Error.Message))
	}
}
