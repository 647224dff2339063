package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalWaitFromAClockBehind: the executor that began a call's approval wait had a clock
// an hour behind the next one's, and handed the call back (it stopped: a rolling restart). The
// next executor counted the approval timeout from the record's start on that clock, found it
// passed an hour ago, and answered approval_timeout at once without asking anybody: a call
// could not be approved once it crossed from a host behind. What is left runs on the NATS
// server's clock, from the record's stored timestamp.
func TestApprovalWaitFromAClockBehind(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	timeout := 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := handBackWaitingCall(t, r, ctx, timeout)

	// The record as executor A wrote it with its clock an hour behind.
	editApprovalRecord(t, ctx, r, id, func(rec *approvalRecord) {
		rec.Since = rec.Since.Add(-time.Hour)
	})

	r.startExecutor(r.managerConfig(Config{ApprovalTimeout: timeout, FrontEnd: new(bool)}), r.env.Connect(t))
	timedOut := func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Code == subjects.CodeApprovalTimeout {
				return true
			}
		}
		return false
	}
	waitFor(t, "needs_approval again, or approval_timeout", func() bool { return r.approvalWaits(id) == 2 || timedOut() })
	if timedOut() {
		t.Fatal("approval_timeout on the next executor at once: the wait, begun on a clock an hour behind, counted from that clock")
	}
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("got %s %+v, want ok (approved within the approval timeout)", res.Status, res.Error)
	}
}

// editApprovalRecord rewrites the approval record of call id (tenant local; not its gate) with
// edit, as an executor that wrote it so would have: a clock behind or ahead, a decision taken.
func editApprovalRecord(t *testing.T, ctx context.Context, r *rig, id string, edit func(*approvalRecord)) {
	t.Helper()
	kv, err := r.env.JS.KeyValue(ctx, subjects.InflightBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(ctx, claimKey("local", id)+".approval.>")
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for k := range keys.Keys() {
		if k != approvalGateKey("local", id) {
			key = k
		}
	}
	entry, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatalf("approval record %q: %v", key, err)
	}
	var rec approvalRecord
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	edit(&rec)
	val, _ := json.Marshal(rec)
	if _, err := kv.Update(ctx, key, val, entry.Revision()); err != nil {
		t.Fatal(err)
	}
}
