package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A request at exec.<tenant> a few bytes under MaxCallBytes passes the front end's own size
// check and is refused too_large by the calls stream (its headers count): refused, nothing
// stored, as one over MaxCallBytes is. It left no audit event at all, though README says a
// request the front end refuses (bad_request, too_large; nothing stored) is recorded.
func TestFrontEndRefusalNotStoredAudited(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	const n = subjects.MaxCallBytes - 8 // under the limit; over it with the headers
	req := subjects.CallRequest{V: subjects.Version, ID: "edge-audit", Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":""}`)}
	empty, _ := json.Marshal(req)
	req.Arguments = json.RawMessage(`{"text":"` + strings.Repeat("x", n-len(empty)) + `"}`)
	data, _ := json.Marshal(req)
	m, err := r.env.NC.Request(subjects.Exec("local"), data, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	var res subjects.CallResult
	if err := json.Unmarshal(m.Data, &res); err != nil || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
		t.Fatalf("got %s (%v), want too_large", m.Data, err)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "the refusal's audit events", func() bool { evs = r.auditEvents("local", req.ID); return hasResultEvent(evs) })
	var trail []string
	for _, ev := range evs {
		trail = append(trail, fmt.Sprintf("%s/%s", ev.Type, ev.Code))
	}
	want := []string{"audit.request/", "audit.decision/" + subjects.CodeTooLarge, "audit.result/" + subjects.CodeTooLarge}
	if strings.Join(trail, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", trail, want)
	}
}
