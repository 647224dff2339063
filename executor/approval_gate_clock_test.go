package executor

import (
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalGateHolderClockBehind: a later request of a call id for another call, sent while
// an earlier request of the id waits for approval, is refused. Whether the earlier one still
// waits was read from its approval record's Since, on the clock of the executor that began the
// wait, against this one's: an executor more than MaxApprovalTimeout behind made its waiting
// request look long expired, the later request took the id's gate and waited on the same
// approvals subject, and the one approval given to the earlier request approved both. The age
// of the record runs on the NATS server's clock, from its stored timestamp.
func TestApprovalGateHolderClockBehind(t *testing.T) {
	r, ctx, first := reviewedWaitingPastDedup(t, "deploy-skew")

	// The first request's record as an executor two hours behind wrote it.
	editApprovalRecord(t, ctx, r, first.ID, func(rec *approvalRecord) {
		rec.Since = rec.Since.Add(-2 * DefaultMaxApprovalTimeout)
	})

	second := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Unreviewed","body":"b","priority":"high"}`)}
	if _, dup, err := r.client.Submit(ctx, "local", second); err != nil || dup {
		t.Fatalf("second request: duplicate %v, %v", dup, err)
	}
	refused := func() bool {
		for _, ev := range r.auditEvents("local", first.ID) {
			if ev.Decision == subjects.CodeBadRequest {
				return true
			}
		}
		return false
	}
	waitFor(t, "the second request held for approval, or refused", func() bool { return r.approvalWaits(first.ID) == 2 || refused() })
	if !refused() {
		t.Fatal("the second request, for another call, waits for approval beside the first: one approval would decide both")
	}
}
