package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// README: every request, decision and result is an audit event. A request the front end
// (exec.<tenant>) refuses for its envelope — bad_request, too_large — is recorded as the same
// request published on calls.<tenant> is (request, decision with its code, result; without an
// id, or without a valid tenant token under "~~", request and decision): it left no event at
// all.
func TestFrontEndRefusalAudited(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{"Zq9s3cr3tV4lue"}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cases := []struct {
		name, tenant, id, body, code string
	}{
		{"another version", "acme", "fe-v2", `{"v":2,"id":"fe-v2","tool":"fixture__echo","arguments":{"text":"Zq9s3cr3tV4lue"}}`, subjects.CodeBadRequest},
		{"a user over its limit", "acme", "fe-user", `{"v":1,"id":"fe-user","tool":"fixture__echo","principal":{"user":"` + strings.Repeat("u", 1500) + `"}}`, subjects.CodeBadRequest},
		{"a member named twice", "acme", "fe-twice", `{"v":1,"id":"fe-twice","tool":"fixture__echo","tool":"x"}`, subjects.CodeBadRequest},
		{"too large", "acme", "fe-large", `{"v":1,"id":"fe-large","tool":"fixture__echo","arguments":{"text":"` + strings.Repeat("x", subjects.MaxCallBytes) + `"}}`, subjects.CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m, err := r.env.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: subjects.Exec(tc.tenant), Data: []byte(tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			var res subjects.CallResult
			if err := json.Unmarshal(m.Data, &res); err != nil || res.Error == nil || res.Error.Code != tc.code {
				t.Fatalf("got %s (%v), want %s", m.Data, err, tc.code)
			}
			var evs []subjects.AuditEvent
			waitFor(t, "the refusal's audit events", func() bool { evs = r.auditEvents(tc.tenant, tc.id); return hasResultEvent(evs) })
			var trail []string
			for _, ev := range evs {
				trail = append(trail, fmt.Sprintf("%s/%s", ev.Type, ev.Code))
			}
			want := []string{"audit.request/", "audit.decision/" + tc.code, "audit.result/" + tc.code}
			if strings.Join(trail, " ") != strings.Join(want, " ") {
				t.Errorf("got %v, want %v", trail, want)
			}
			if len(evs) == 3 && (evs[2].Decision != subjects.CallRefused || evs[2].Message != res.Error.Message) {
				t.Errorf("result event %s %q, answer %q", evs[2].Decision, evs[2].Message, res.Error.Message)
			}
			if tc.id == "fe-user" && len(evs) > 0 && (!evs[0].Truncated || len(evs[0].User) > subjects.MaxUserBytes+len("…")) {
				t.Errorf("request event user of %d bytes, truncated %v: want it cut to %d", len(evs[0].User), evs[0].Truncated, subjects.MaxUserBytes)
			}
			all, _ := json.Marshal(evs)
			if strings.Contains(string(all), "Zq9s3cr3tV4lue") {
				t.Errorf("the secret is in the audit events: %.300s", all)
			}
		})
	}
	// Without an id, and on a subject without a valid tenant token: request and decision.
	for _, tc := range []struct{ subject, tenant string }{{subjects.Exec("acme"), "acme"}, {subjects.Root + ".exec.~", ""}} {
		body := `{"v":1,"tool":"fixture__echo","arguments":{"text":"no id ` + tc.subject + `"}}`
		if _, err := r.env.NC.RequestWithContext(ctx, tc.subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the refusal without id of "+tc.subject, func() bool {
			req, dec := 0, 0
			for _, ev := range r.auditEventsWhere(func(ev subjects.AuditEvent) bool { return ev.Tenant == tc.tenant && ev.CallID == "" }) {
				switch {
				case ev.Type == "audit.request" && strings.Contains(string(ev.Arguments), tc.subject):
					req++
				case ev.Type == "audit.decision" && ev.Code == subjects.CodeBadRequest:
					dec++
				}
			}
			return req == 1 && dec >= 1
		})
	}
}
