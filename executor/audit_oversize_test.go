package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// An audit event bigger than NATS takes (a principal of megabytes that JSON escapes six times
// over) is stored cut down, marked truncated: it is neither retried forever, which held up
// every later event that needed a retry, nor lost. The call itself is refused: a user name or
// role list that size is no principal.
func TestAuditOversizeEvent(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	// Each request is a quarter of the largest message (under the executor's request limit);
	// JSON escapes '<' and '&' to six bytes each in the audit event.
	n := int(r.env.NC.MaxPayload()) / 4
	roles := make([]string, n/20)
	for i := range roles {
		roles[i] = strings.Repeat("&", 18)
	}
	rolesJSON, _ := json.Marshal(roles)
	rolesRaw := strings.ReplaceAll(string(rolesJSON), `\u0026`, "&")
	requests := map[string]string{
		"big-user":  `{"id":"big-user","tool":"fixture__echo","arguments":{"text":"hi"},"principal":{"user":"` + strings.Repeat("<", n) + `"}}`,
		"big-roles": `{"id":"big-roles","tool":"fixture__echo","arguments":{"text":"hi"},"principal":{"user":"local","roles":` + rolesRaw + `}}`,
	}
	// Published on the calls stream, as a publisher with no front end does (the exec front end
	// refuses a bad envelope itself, before the audit).
	for id, data := range requests {
		sub, err := r.env.NC.SubscribeSync(subjects.Result("local", id))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		_, err = r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(data))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		m, err := sub.NextMsg(waitLimit)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var res subjects.CallResult
		if err := json.Unmarshal(m.Data, &res); err != nil {
			t.Fatalf("%s: answer %.200q: %v", id, m.Data, err)
		}
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeBadRequest {
			t.Errorf("%s: got %s %+v, want refused bad_request", id, res.Status, res.Error)
		}
		if len(m.Data) > 4096 {
			t.Errorf("%s: the answer is %d bytes long", id, len(m.Data))
		}
		var evs []subjects.AuditEvent
		waitFor(t, id+"'s audit events", func() bool {
			evs = r.auditEvents("local", id)
			return len(evs) >= 2
		})
		if !evs[0].Truncated || len(evs[0].User) > 2048 || len(evs[0].Roles) > 256 {
			t.Errorf("%s: request event truncated=%v, user %d bytes, %d roles: want it cut down", id, evs[0].Truncated, len(evs[0].User), len(evs[0].Roles))
		}
	}
	// Later events are not held up behind them.
	ok := r.call("local", "fixture__echo", `{"text":"after"}`)
	if ok.Status != subjects.CallOK {
		t.Fatalf("got %s %+v", ok.Status, ok.Error)
	}
	waitFor(t, "the next call's audit events", func() bool { return hasResultEvent(r.auditEvents("local", ok.ID)) })
	if st := r.ex.Stats(); st.AuditDropped != 0 {
		t.Errorf("got %d audit events dropped, want 0", st.AuditDropped)
	}
}
