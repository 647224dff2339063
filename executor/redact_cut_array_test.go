package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRedactCutSensitiveArray: a sensitive key's array value that goes on past what
// redactPrefix decodes (8× the cap) is replaced whole, its element cut in two included: the
// rest of the decoded bytes was kept as text, and the start of that element, the sensitive
// key's value, reached the audit event.
func TestRedactCutSensitiveArray(t *testing.T) {
	r := newRedactor(nil)
	huge := strings.Repeat("lorem ipsum ", 100_000)
	for name, in := range map[string]string{
		"one huge element":       `{"tokens":["sk-live-999 ` + huge + `"],"n":1}`,
		"element across the cut": `{"tokens":[` + strings.Repeat(`"x",`, 8185) + `"sk-live-999 ` + huge + `"],"n":1}`,
		"nested in the array":    `{"api_key":[{"v":"sk-live-999 ` + huge + `"}],"n":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, trunc := r.JSON([]byte(in), 4096)
			if !trunc || len(out) > 4096+64 || !json.Valid(out) {
				t.Fatalf("%d bytes, truncated %v, valid %v", len(out), trunc, json.Valid(out))
			}
			if strings.Contains(string(out), "sk-live-999") || strings.Contains(string(out), "lorem") {
				t.Errorf("the sensitive key's value kept: %.300s", out)
			}
		})
	}
}

// fixedResult answers every dispatch with result.
type fixedResult string

func (f fixedResult) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(f)}
}

// The audit result event of a call whose result holds such an array keeps none of it; the
// caller gets the result whole.
func TestAuditResultCutSensitiveArray(t *testing.T) {
	result := `{"content":[],"structuredContent":{"tokens":["sk-live-999 ` + strings.Repeat("lorem ipsum ", 4000) + `"]}}`
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: fixedResult(result)}})
	res := r.call("local", "fixture__echo", `{"text":"a"}`)
	if res.Status != subjects.CallOK || string(res.Result) != result {
		t.Fatalf("got %s %+v, want the result whole", res.Status, res.Error)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "the call's audit result event", func() bool {
		evs = r.auditEvents("local", res.ID)
		return hasResultEvent(evs)
	})
	ev := evs[len(evs)-1]
	if !ev.Truncated || ev.ResBytes != len(result) {
		t.Errorf("result event: truncated %v, %d bytes, want truncated, %d", ev.Truncated, ev.ResBytes, len(result))
	}
	if strings.Contains(string(ev.Result), "sk-live-999") || strings.Contains(string(ev.Result), "lorem") {
		t.Errorf("the audit result event keeps the sensitive key's value: %.300s", ev.Result)
	}
}
