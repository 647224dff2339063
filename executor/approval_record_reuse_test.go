package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalRecordNotTakenByAnotherRequest: a call's approval record outlives its answer when
// the results stream forgets the answer first (ResultsMaxAge shorter than the claims bucket's
// TTL, or an old answer discarded at ResultsMaxBytes). A new request of the same call id, past
// the calls stream's de-duplication window, found the record approved and no answer, and ran
// as approved by the first request's approver: any tool, with any arguments, a side-effecting
// one included, without anyone asked. An approval is one request's: another request of the id
// is held for approval again.
func TestApprovalRecordNotTakenByAnotherRequest(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	// Short timeouts: the first request's approval is long past (as after hours) when the
	// second request comes.
	r.startExecutor(r.managerConfig(Config{Approve: []string{"ticketing__listIssues", "ticketing__createIssue"},
		CallTimeout: 2 * time.Second, AckWait: 2 * time.Second, RelistTimeout: time.Second}), r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream, subjects.ResultsStream)

	// The first request: a read-only listing, approved and answered.
	first := subjects.CallRequest{ID: "reused", Tool: "ticketing__listIssues", Arguments: json.RawMessage(`{"limit":1}`)}
	if _, _, err := r.client.Submit(ctx, "local", first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval of the listing", func() bool { return r.approvalWaits(first.ID) == 1 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: first.ID, Approve: true, By: "ops", Reason: "a listing"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	if res, err := r.client.Await(ctx, "local", first.ID); err != nil || res.Status != subjects.CallOK {
		t.Fatalf("the listing: %+v %v", res, err)
	}
	r.waitCallsSettled(ctx)

	// Its answer leaves the results stream (aged out, or discarded at its byte limit).
	rs, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Purge(ctx, jetstream.WithPurgeSubject(subjects.Result("local", first.ID))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(window + 200*time.Millisecond) // the streams forget the id

	// Another request of the id: a side-effecting call nobody approved.
	second := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Unapproved","body":"b","priority":"low"}`)}
	if _, dup, err := r.client.Submit(ctx, "local", second); err != nil || dup {
		t.Fatalf("second request: duplicate %v, %v", dup, err)
	}
	answered := func() bool {
		_, ok, err := getResult(ctx, rs, "local", first.ID)
		return err == nil && ok
	}
	waitFor(t, "the second request held for approval, or answered", func() bool { return r.approvalWaits(first.ID) == 2 || answered() })
	if n := r.ticketCount(); n != 0 {
		t.Errorf("%d tickets: the second request ran on the first one's approval", n)
	}
	if n := r.approvalWaits(first.ID); n != 2 {
		t.Fatalf("the second request and the first were held for approval %d times in all, want 2 (once each)", n)
	}
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: first.ID, Approve: false, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("deny: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeDenied {
		t.Errorf("the second request's answer is %s %+v, want refused denied", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 0 {
		t.Errorf("%d tickets after the denial, want 0", n)
	}
}

// TestApprovalDeadlineFromAClockAhead: the executor that began a call's approval wait had a
// clock ahead of the next one's (by an hour here), and handed the call back. The next
// executor counted what was left from the record's start on that clock: the call waited an
// hour more than its approval timeout (past MaxApprovalTimeout, holding a worker), and its
// needs_approval said so. What is left is never more than the approval timeout on this clock.
func TestApprovalDeadlineFromAClockAhead(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	timeout := 2 * handBackDelay
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := handBackWaitingCall(t, r, ctx, timeout)

	// The record as executor A wrote it with its clock an hour ahead.
	editApprovalRecord(t, ctx, r, id, func(rec *approvalRecord) {
		rec.Since = rec.Since.Add(time.Hour)
	})

	r.startExecutor(r.managerConfig(Config{ApprovalTimeout: timeout, FrontEnd: new(bool)}), r.env.Connect(t))
	waitFor(t, "needs_approval again", func() bool { return r.approvalWaits(id) == 2 })
	for _, ev := range r.auditEvents("local", id) {
		if ev.Decision == subjects.CodeNeedsApproval && strings.Contains(ev.Message, "1h") {
			t.Errorf("needs_approval says %q: more than the approval timeout (%s)", ev.Message, timeout)
		}
	}
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatalf("no answer within %s (approval timeout %s): %v", waitLimit, timeout, err)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout {
		t.Errorf("got %s %+v, want refused approval_timeout", res.Status, res.Error)
	}
}
