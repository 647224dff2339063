package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// panickingDispatcher panics on every tools/call (a connector's bug, in-process).
type panickingDispatcher struct{}

func (panickingDispatcher) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	panic("connector bug")
}

// TestAuditPanicAnswer: a call whose handler panicked was answered (outcome_unknown once
// tools/call was sent, else internal) and acknowledged, but the audit stream never said how it
// ended: its request and dispatch events were followed by no decision and no result, as if it
// still ran. The answer stored is recorded as any other: a decision with its code, then the
// result.
func TestAuditPanicAnswer(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Dispatcher: panickingDispatcher{}}), r.env.NC)
	r.waitTool("ticketing__createIssue")
	res := r.call("local", "ticketing__createIssue", `{"title":"t","body":"b","priority":"low"}`, func(req *subjects.CallRequest) { req.ID = "panics" })
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Fatalf("answer %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	have := func(typ string) bool {
		for _, ev := range r.auditEvents("local", "panics") {
			if ev.Type == "audit."+typ && ev.Code == subjects.CodeOutcomeUnknown && ev.Decision != "" {
				return true
			}
		}
		return false
	}
	// (audit events are published asynchronously: waited for, bounded)
	for deadline := time.Now().Add(waitLimit); !have(subjects.AuditResult) || !have(subjects.AuditDecision); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			var types []string
			for _, ev := range r.auditEvents("local", "panics") {
				types = append(types, ev.Type+" "+ev.Decision+" "+ev.Code)
			}
			t.Fatalf("audit events of the call answered outcome_unknown after a panic: %q, want an outcome_unknown decision and result", types)
		}
	}
	for _, ev := range r.auditEvents("local", "panics") {
		if ev.Type == "audit."+subjects.AuditResult && (ev.Tool != "ticketing__createIssue" || ev.User != "local" || ev.Decision != subjects.CallFailed) {
			t.Errorf("result event %+v: want tool ticketing__createIssue, user local, decision failed", ev)
		}
	}
}

// TestAuditPanicAnswerNamesCall: the decision and result events recorded for a call answered
// after a panic named the request's principal as sent and no server, where the call's other
// events name the principal the policy resolved and the tool's server: a request naming no
// user (served as local under the open policy) had an "allowed" decision by local, then an
// outcome_unknown decision and result by nobody, on no server. They name the call as the
// call's other events do.
func TestAuditPanicAnswerNamesCall(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Dispatcher: panickingDispatcher{}}), r.env.NC)
	r.waitTool("ticketing__createIssue")
	res := r.call("local", "ticketing__createIssue", `{"title":"t","body":"b","priority":"low"}`, func(req *subjects.CallRequest) {
		req.ID, req.Principal = "panics-no-user", subjects.Principal{}
	})
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Fatalf("answer %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	// (audit events are published asynchronously: waited for, bounded)
	waitFor(t, "the result event of the call answered after a panic", func() bool {
		for _, ev := range r.auditEvents("local", "panics-no-user") {
			if ev.Type == "audit."+subjects.AuditResult {
				return true
			}
		}
		return false
	})
	for _, ev := range r.auditEvents("local", "panics-no-user") {
		if ev.Type != "audit."+subjects.AuditDecision && ev.Type != "audit."+subjects.AuditResult {
			continue
		}
		if ev.User != "local" || ev.Server != "ticketing" {
			t.Errorf("%s event (decision %s): user %q, server %q; want local (as the policy served it), ticketing", ev.Type, ev.Decision, ev.User, ev.Server)
		}
	}
}
