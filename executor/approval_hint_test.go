package executor

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalWrongVersion: every other request refuses a "v" it does not speak (bad_request,
// "wrong version" in the README's error codes), but an Approval with "v":2 approved the call.
func TestApprovalWrongVersion(t *testing.T) {
	c := &call{tenant: "local", req: subjects.CallRequest{ID: "c-v2"}}
	w := newApprovalWait(c)
	rep, ok := w.answer([]byte(`{"v":2,"id":"c-v2","approve":true}`))
	if !ok || rep.OK || rep.Error == nil || rep.Error.Code != subjects.CodeBadRequest {
		t.Fatalf("v 2: %+v %v, want bad_request", rep, ok)
	}
	// The call still waits: a v 1 approval decides it.
	if rep, ok := w.answer([]byte(`{"v":1,"id":"c-v2","approve":true}`)); !ok || !rep.OK {
		t.Fatalf("v 1 after a refused v 2: %+v %v, want OK", rep, ok)
	}
}

// TestApprovalHintNamesTenant: the needs_approval audit message tells the approver what to run;
// for a call of tenant acme it said "mcpstream approve ID", which looks in tenant local and
// answers that no such call waits.
func TestApprovalHintNamesTenant(t *testing.T) {
	for _, tc := range []struct{ tenant, want, not string }{
		{"acme", "mcpstream approve c-1 --tenant acme (or deny)", ""},
		{"local", "mcpstream approve c-1 (or deny)", "--tenant"},
	} {
		got := approvalHint(&call{tenant: tc.tenant, req: subjects.CallRequest{ID: "c-1"}, tool: &tool{Public: "kb__wipe"}}, time.Minute)
		if !strings.Contains(got, tc.want) || tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("tenant %s: %q, want %q", tc.tenant, got, tc.want)
		}
	}
}

// TestTimeoutMessageOnce: a tools/call past its timeout was refused with "no answer within
// 1ms: no answer within 1ms; the call was sent and may have run".
func TestTimeoutMessageOnce(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	// A deadline so short that it can pass before the call is sent (refused unavailable, nothing
	// sent, which is right too) is tried again with a longer one.
	var res subjects.CallResult
	for _, ms := range []int64{5, 50, 500, 2000} {
		res = r.call("local", "fixture__slow", `{"ms":10000}`, timeoutMs(ms))
		if res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
			break
		}
	}
	if res.Error == nil || res.Error.Code != subjects.CodeTimeout {
		t.Fatalf("got %s %+v, want timeout", res.Status, res.Error)
	}
	if n := strings.Count(res.Error.Message, "no answer within"); n != 1 {
		t.Errorf("message %q says \"no answer within\" %d times, want once", res.Error.Message, n)
	}
}
