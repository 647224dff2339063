package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalNotSharedWithAnotherWaitingRequest: approvals are sent on the call id's subject
// (approvals.<tenant>.<id>), and every request of that id waiting for approval subscribes to it.
// A second request of the id, published once the calls stream's de-duplication window was past
// while the first still waited (approval timeouts run up to an hour, the window is 10 minutes),
// with another tool or other arguments, waited on the same subject: the one approval an
// approver gave the first request, the one it reviewed, approved the second too, which ran
// unreviewed. The second request is refused while the first waits.
func TestApprovalNotSharedWithAnotherWaitingRequest(t *testing.T) {
	approvalWithTwoRequests(t, `{"title":"Unreviewed","body":"b","priority":"high"}`, true)
}

// TestApprovalSharedWithAResend: a resend of the same call (same tool, arguments and principal)
// past the de-duplication window while the first request waits is not refused: the one
// approval decides both, and the call runs once.
func TestApprovalSharedWithAResend(t *testing.T) {
	approvalWithTwoRequests(t, `{"title": "Reviewed", "body": "b", "priority": "low"}`, false)
}

// approvalWithTwoRequests sends a request of createIssue that needs approval and, while it
// waits, past the de-duplication window, a second request of its id with secondArgs; then one
// approval. Only the reviewed ticket may be created, once; the second request is refused
// bad_request when refuseSecond.
func approvalWithTwoRequests(t *testing.T, secondArgs string, refuseSecond bool) {
	r, ctx, first := reviewedWaitingPastDedup(t, "deploy-1")

	// Another request of the id, with other arguments, while the first still waits.
	second := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(secondArgs)}
	if _, dup, err := r.client.Submit(ctx, "local", second); err != nil || dup {
		t.Fatalf("second request: duplicate %v, %v", dup, err)
	}
	// (A refusal is the second request's alone: its caller and the audit stream have it, the
	// results stream not.)
	answered := func() bool {
		for _, ev := range r.auditEvents("local", first.ID) {
			if ev.Type == auditType(subjects.AuditResult) {
				return true
			}
		}
		return false
	}
	waitFor(t, "the second request held for approval, or answered", func() bool { return r.approvalWaits(first.ID) == 2 || answered() })

	// One approval, given for the first request.
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: first.ID, Approve: true, By: "ops", Reason: "reviewed: Reviewed, low"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	waitFor(t, "the approved call ran", func() bool { return r.ticketCount() >= 1 })
	r.waitCallsSettled(ctx)
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets after one approval, want 1", n)
	}
	// (The claim of the call id lets one of the two run: whichever claimed it first.)
	rep := r.mgr.Dispatch(ctx, "ticketing", subjects.DispatchRequest{V: 1, CallID: "list", Tool: "listIssues", Arguments: json.RawMessage(`{"limit":10}`)})
	if rep.Error != nil {
		t.Fatalf("listIssues: %v", rep.Error)
	}
	var list struct {
		StructuredContent struct {
			Issues []struct {
				Title string `json:"title"`
			} `json:"issues"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(rep.Result, &list); err != nil {
		t.Fatal(err)
	}
	for _, is := range list.StructuredContent.Issues {
		if is.Title != "Reviewed" {
			t.Errorf("ticket %q created: the second request ran on the approval given to the first", is.Title)
		}
	}
	refused, approved := false, 0
	for _, ev := range r.auditEvents("local", first.ID) {
		switch {
		case ev.Decision == subjects.CodeBadRequest && ev.Code == subjects.CodeBadRequest:
			refused = true
		case ev.Decision == subjects.DecisionApproved:
			approved++
		}
	}
	if refuseSecond && approved != 1 {
		t.Errorf("one approval approved %d requests, want 1", approved)
	}
	if refused != refuseSecond {
		t.Errorf("the second request refused bad_request: %v, want %v", refused, refuseSecond)
	}
}

// reviewedWaitingPastDedup starts a rig whose executor holds ticketing__createIssue for
// approval, submits the request an approver reviews (call id, the "Reviewed" ticket), waits
// for its needs_approval, then lets the de-duplication window of the calls and results streams
// (shortened to 1 s) pass: a later request of the id is stored, and taken, again. The context
// ends with the test (3 waitLimit at most).
func reviewedWaitingPastDedup(t *testing.T, id string) (*rig, context.Context, subjects.CallRequest) {
	t.Helper()
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Approve: []string{"ticketing__createIssue"}, ApprovalTimeout: 2 * waitLimit}), r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	t.Cleanup(cancel)
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream, subjects.ResultsStream)

	first := subjects.CallRequest{ID: id, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Reviewed","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval of the first request", func() bool { return r.approvalWaits(first.ID) == 1 })
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	return r, ctx, first
}
