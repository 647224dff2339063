package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestOtherRequestRefusalNotTheIDsAnswer: a later request of a call id for another call, sent
// while an earlier request of the id waits for approval, is refused bad_request. That refusal
// was stored as the id's one answer (results.<tenant>.<id>): the earlier request's caller, who
// reads that subject (Call and CallDirect poll it, Await waits on it), was told "bad_request"
// while its call still waited; approved, the call then ran (the ticket was created), and its
// result was refused by the results stream and lost — its caller kept the refusal of a call
// that ran. The refusal goes to the later request's caller only; the id's answer is the
// earlier request's.
func TestOtherRequestRefusalNotTheIDsAnswer(t *testing.T) {
	r, ctx, first := reviewedWaitingPastDedup(t, "deploy-2")

	// The later request, for another call, waits for its answer: it is refused.
	second := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Unreviewed","body":"b","priority":"high"}`)}
	res, err := r.client.CallDirect(ctx, "local", second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeBadRequest {
		t.Fatalf("the later request: %s %+v, want refused bad_request", res.Status, res.Error)
	}

	// The earlier request still waits: its id has no answer yet.
	rs, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	if prev, ok, err := getResult(ctx, rs, "local", first.ID); err != nil || ok {
		t.Errorf("while the earlier request waits, its id's stored answer is %s %+v (%v): its caller reads it as its own", prev.Status, prev.Error, err)
	}

	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: first.ID, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	got, err := r.client.Await(ctx, "local", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.waitCallsSettled(ctx)
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1 (the reviewed one)", n)
	}
	if got.Status != subjects.CallOK || got.Error != nil {
		t.Errorf("the approved call ran, but its id's answer is %s %+v", got.Status, got.Error)
	}
}

// TestOtherRequestsCheckedAtOnce: two requests of a call id for different calls, both in the
// calls stream (the second sent past the de-duplication window while no executor took the
// first), are taken by two workers at once. Each looked for an earlier request's approval
// record before writing its own: the later one looked while the earlier had written none yet
// and went on, and the earlier one does not look at later ones — both waited on the id's
// approvals subject, and the one approval an approver gave decided both. One of them waits, the
// other is refused bad_request.
func TestOtherRequestsCheckedAtOnce(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream, subjects.ResultsStream)

	first := subjects.CallRequest{ID: "deploy-3", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Reviewed","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", first); err != nil {
		t.Fatal(err)
	}
	calls, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := calls.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstSeq := info.State.LastSeq
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	second := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Unreviewed","body":"b","priority":"high"}`)}
	if _, dup, err := r.client.Submit(ctx, "local", second); err != nil || dup {
		t.Fatalf("second request: duplicate %v, %v", dup, err)
	}

	// The first request looks only once the second has gone its way.
	arrived, release := make(chan struct{}), make(chan struct{})
	cfg := r.managerConfig(Config{Approve: []string{"ticketing__createIssue"}, ApprovalTimeout: 2 * waitLimit})
	cfg.hooks.approvalCheck = func(id string, seq uint64) {
		if id == first.ID && seq == firstSeq {
			close(arrived)
			<-release
		}
	}
	r.startExecutor(cfg, r.env.NC)
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the first request never reached its approval")
	}
	outcomes := func() (waiting, refused int) {
		for _, ev := range r.auditEvents("local", first.ID) {
			switch ev.Decision {
			case subjects.CodeNeedsApproval:
				waiting++
			case subjects.CodeBadRequest:
				refused++
			}
		}
		return waiting, refused
	}
	waitFor(t, "the second request waits or is refused", func() bool { w, f := outcomes(); return w+f == 1 })
	close(release)
	waitFor(t, "both requests wait or are refused", func() bool { w, f := outcomes(); return w+f == 2 })
	if w, f := outcomes(); w != 1 || f != 1 {
		t.Errorf("%d requests of the id wait for approval, %d refused: want one waiting (one approval decides every request waiting)", w, f)
	}
}

// TestApprovalGateBucketFull: the claims bucket refuses the call id's approval gate (a bound of
// the bucket reached): the call still waits for approval, once, rather than going back to the
// queue again and again (each delivery a new request in the audit).
func TestApprovalGateBucketFull(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Approve: []string{"fixture__echo"}, ApprovalTimeout: 2 * waitLimit}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	s, err := r.env.JS.Stream(ctx, "KV_"+subjects.InflightBucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = 1
	if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := r.env.JS.KeyValue(ctx, subjects.InflightBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, claimKey("other", "c-0"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	req := subjects.CallRequest{ID: "gate-full", Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"hi"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(req.ID) == 1 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("got %s %+v, want ok", res.Status, res.Error)
	}
	requests := 0
	for _, ev := range r.auditEvents("local", req.ID) {
		if ev.Type == auditType(subjects.AuditRequest) {
			requests++
		}
	}
	if requests != 1 {
		t.Errorf("the call was delivered %d times, want once", requests)
	}
}
