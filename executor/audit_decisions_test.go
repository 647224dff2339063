package executor

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A call's decision events are its pipeline's decisions, one per deciding step, each once: a
// plain call refused rate_limited is allowed by the policy (step 4) and then refused by its
// rates (step 8): two decisions, allowed then rate_limited, the last the answer's. A call that
// needs approval takes its rates before anybody is asked: refused rate_limited then, it has
// that one decision, no needs_approval. An approved call: needs_approval, approved. README and
// doc.go say so (a consumer counts calls by their result events, not their decisions).
//
// The limiter's clock is stopped mid-window (oneRateWindow): on the wall clock, a window (10
// minutes) that ended between a-1 and a-2 let a-2 through its rate (⌊1×(1−frac)⌋ is 0 once the
// next window begins), and it waited for an approver nobody was going to be, unanswered within
// the test's wait.
func TestAuditDecisionsOfRateLimitedCalls(t *testing.T) {
	rate, clock := oneRateWindow()
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Limits: Limits{Tools: map[string]Rate{
		"fixture__echo": rate,
		"fixture__wipe": rate,
	}}, hooks: testHooks{rateClock: clock}}})
	trail := func(id string) []string {
		var evs []subjects.AuditEvent
		waitFor(t, "the audit events of "+id, func() bool { evs = r.auditEvents("local", id); return hasResultEvent(evs) })
		var out []string
		for _, ev := range evs {
			if ev.Type == "audit."+subjects.AuditDecision {
				out = append(out, ev.Decision)
			}
		}
		return out
	}
	want := func(id string, decisions ...string) {
		t.Helper()
		if got := trail(id); !slices.Equal(got, decisions) {
			t.Errorf("call %s: decisions %s, want %s", id, strings.Join(got, ","), strings.Join(decisions, ","))
		}
	}
	withID := func(id string) func(*subjects.CallRequest) { return func(q *subjects.CallRequest) { q.ID = id } }

	if res := r.call("local", "fixture__echo", `{"text":"a"}`, withID("p-1")); res.Status != subjects.CallOK {
		t.Fatalf("p-1: %s %+v", res.Status, res.Error)
	}
	if res := r.call("local", "fixture__echo", `{"text":"b"}`, withID("p-2")); res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Fatalf("p-2: %s %+v, want rate_limited", res.Status, res.Error)
	}
	want("p-1", subjects.DecisionAllowed)
	want("p-2", subjects.DecisionAllowed, subjects.CodeRateLimited)

	done := make(chan subjects.CallResult, 1)
	go func() { done <- r.call("local", "fixture__wipe", `{}`, withID("a-1")) }()
	waitFor(t, "a-1 waiting for approval", func() bool {
		return slices.ContainsFunc(r.auditEvents("local", "a-1"), func(ev subjects.AuditEvent) bool { return ev.Decision == subjects.CodeNeedsApproval })
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "a-1", Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve a-1: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("a-1: %s %+v", res.Status, res.Error)
	}
	// (An approval timeout: were a-2 let through its rate, it would be refused approval_timeout,
	// not wait for an approver until the test's wait ends.)
	a2 := func(q *subjects.CallRequest) { q.ID, q.ApprovalTimeoutMs = "a-2", 3000 }
	if res := r.call("local", "fixture__wipe", `{}`, a2); res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Fatalf("a-2: %s %+v, want rate_limited", res.Status, res.Error)
	}
	want("a-1", subjects.CodeNeedsApproval, subjects.DecisionApproved)
	want("a-2", subjects.CodeRateLimited)
}
