package executor

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// A result the connector refuses for its shape (here a content item that is not an object) is
// answered protocol_error without a result, and, like a result that fails its outputSchema,
// kept in the audit result event: capped and redacted (the executor's secret, and the text past
// AuditBytes cut). In process and over NATS (DispatchReply.Withheld).
func TestResultShapeRefusedKeptInAudit(t *testing.T) {
	for _, viaNATS := range []bool{false, true} {
		name := "in-process"
		if viaNATS {
			name = "nats"
		}
		t.Run(name, func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"fixture"}, viaNATS: viaNATS, exec: Config{Secrets: []string{reportSecret}}})
			r.waitTool("fixture__report")
			res := r.call("local", "fixture__report", `{"mode":"shape"}`)
			if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeProtocolError ||
				!strings.Contains(res.Error.Message, "not an object") {
				t.Fatalf("got %s %+v, want failed protocol_error saying an item is not an object", res.Status, res.Error)
			}
			if len(res.Result) != 0 {
				t.Errorf("the refused answer carries a result: %.200s", res.Result)
			}
			var evs []subjects.AuditEvent
			waitFor(t, "audit result event", func() bool { evs = r.auditEvents("local", res.ID); return hasResultEvent(evs) })
			last := evs[len(evs)-1]
			if last.Code != subjects.CodeProtocolError || last.Message != res.Error.Message {
				t.Errorf("audit result event %+v, want the answer's protocol_error", last)
			}
			if len(last.Result) == 0 || last.ResBytes <= reportShapePad || !last.Truncated {
				t.Fatalf("audit result event keeps result %.200q (%d bytes, truncated %v); want the server's result, capped",
					last.Result, last.ResBytes, last.Truncated)
			}
			if len(last.Result) > 8<<10 {
				t.Errorf("audit result is %d bytes, want it capped near AuditBytes", len(last.Result))
			}
			if got := string(last.Result); strings.Contains(got, reportSecret) || !strings.Contains(got, redact.Placeholder) {
				t.Errorf("audit result %.200s: want the secret redacted", got)
			}
		})
	}
}
