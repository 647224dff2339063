package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A read-only call resent past the calls stream's de-duplication window runs again, and its
// caller gets the id's first answer, the one stored (duplicate). Its audit result event said
// the outcome of the run the caller never saw (ok, over a stored timeout): it records the answer
// given, and says what the run itself ended with.
func TestAuditResultOfResendPastWindow(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r.shortenDedup(ctx, time.Second, subjects.CallsStream)
	id := "past-window"
	first := r.call("local", "fixture__slow", `{"ms":400}`, func(q *subjects.CallRequest) { q.ID = id; q.TimeoutMs = 100 })
	if first.Error == nil || first.Error.Code != subjects.CodeTimeout {
		t.Fatalf("first: got %s %+v, want timeout", first.Status, first.Error)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "the first result event", func() bool { evs = r.auditEvents("local", id); return hasResultEvent(evs) })
	time.Sleep(1500 * time.Millisecond) // past the window
	again := r.call("local", "fixture__slow", `{"ms":400}`, func(q *subjects.CallRequest) { q.ID = id; q.TimeoutMs = 10000 })
	if !again.Duplicate || again.Error == nil || again.Error.Code != subjects.CodeTimeout {
		t.Fatalf("resend: got %s %+v duplicate=%v, want the stored timeout", again.Status, again.Error, again.Duplicate)
	}
	waitFor(t, "the resend's result event", func() bool {
		evs = r.auditEvents("local", id)
		n := 0
		for _, ev := range evs {
			if ev.Type == "audit."+subjects.AuditResult {
				n++
			}
		}
		return n == 2
	})
	last := evs[len(evs)-1]
	if last.Type != "audit."+subjects.AuditResult || last.Decision != again.Status || last.Code != subjects.CodeTimeout || last.Message == "" {
		t.Errorf("the resend's result event: %s %s/%s %q, the answer given %s %s", last.Type, last.Decision, last.Code, last.Message, again.Status, again.Error.Code)
	}
}
