package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestResendAfterDedupWindow: a resend of an answered call id after the calls stream's
// de-duplication window gets the stored answer. It used to run the call again: a side-effecting
// call refused before dispatch (no claim to find) then ran, and the caller got its result while
// the results stream kept the refusal; a call that had timed out waiting for approval asked for
// approval again.
func TestResendAfterDedupWindow(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing", "fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)
	id := func(id string) func(*subjects.CallRequest) { return func(q *subjects.CallRequest) { q.ID = id } }
	create := func(title any) string {
		if s, ok := title.(string); ok {
			return `{"title":"` + s + `","body":"b","priority":"low"}`
		}
		return `{"title":5}`
	}

	// First answers: refused before any dispatch, and an approval that timed out.
	if res := r.call("local", "ticketing__createIssue", create(nil), id("bad-args")); res.Error == nil || res.Error.Code != subjects.CodeInvalidArguments {
		t.Fatalf("first: %s %+v", res.Status, res.Error)
	}
	if res := r.call("local", "fixture__wipe", `{}`, id("unapproved"), approvalMs(100)); res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout {
		t.Fatalf("first: %s %+v", res.Status, res.Error)
	}
	ok := r.call("local", "fixture__echo", `{"text":"once"}`, id("read-only"))
	if ok.Status != subjects.CallOK {
		t.Fatalf("first: %s %+v", ok.Status, ok.Error)
	}
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the ids

	// The resends (the first one now with valid arguments) get the stored answers.
	res := r.call("local", "ticketing__createIssue", create("now valid"), id("bad-args"))
	if res.Error == nil || res.Error.Code != subjects.CodeInvalidArguments || !res.Duplicate {
		t.Errorf("resend of a refused call: %s %+v duplicate %v, want the stored invalid_arguments", res.Status, res.Error, res.Duplicate)
	}
	if n := r.ticketCount(); n != 0 {
		t.Errorf("%d tickets: the refused call ran on its resend", n)
	}
	res = r.call("local", "fixture__wipe", `{}`, id("unapproved"), approvalMs(60_000))
	if res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout || !res.Duplicate {
		t.Errorf("resend of a call whose approval timed out: %s %+v duplicate %v", res.Status, res.Error, res.Duplicate)
	}
	// A read-only call may run again, but its answer is the stored one.
	res = r.call("local", "fixture__echo", `{"text":"twice"}`, id("read-only"))
	if res.Status != subjects.CallOK || !res.Duplicate || string(res.Result) != string(ok.Result) {
		t.Errorf("resend of a read-only call: %s duplicate %v result %s, want the stored %s", res.Status, res.Duplicate, res.Result, ok.Result)
	}
	for _, id := range []string{"bad-args", "unapproved", "read-only"} {
		stored, err := r.client.Await(ctx, "local", id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Duplicate {
			t.Errorf("%s: the stored answer is marked duplicate", id)
		}
	}
}
