package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// A caller's words quoted cut short in a refusal's message (%.300q of a subject with no valid
// tenant token, %.20q of an id over its limit) ended with the quote's closing '"', no "…" before
// or after it that StringCut could see as the cut: a configured secret that straddled the cut
// left its start in the audit decision event and in the log line of the dropped call message.
// (A user, role and tool cut to their audit caps, "…" appended, are guards: they were redacted.)
func TestAuditRedactsSecretAtQuoteCut(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	leak := secret[:5] // more than MinLen bytes of it
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}, logTo: logs})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	// A tenant token over its limit whose secret starts 6 runes before the subject's 300th.
	for _, kind := range []string{".exec.", ".calls."} {
		prefix := subjects.Root + kind
		subj := prefix + strings.Repeat("x", 300-len(prefix)-6) + secret + strings.Repeat("y", subjects.MaxUserBytes)
		body := []byte(`{"id":"qc` + kind + `","tool":"fixture__echo"}`)
		if kind == ".exec." {
			if _, err := r.env.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: subj, Data: body}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := r.env.JS.Publish(ctx, subj, body); err != nil {
			t.Fatal(err)
		}
	}
	// An id over its limit whose secret starts 5 bytes before its 20th.
	id := strings.Repeat("i", 15) + secret + strings.Repeat("j", maxCallID)
	body := `{"id":"` + id + `","tool":"fixture__echo"}`
	if _, err := r.env.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: subjects.Exec("local"), Data: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(body)); err != nil {
		t.Fatal(err)
	}

	// A user, a role and a tool over their audit caps, cut 6 bytes into the secret.
	long := `{"id":"qc-caps","tool":"` + strings.Repeat("t", auditMaxTool-6) + secret + `","principal":{"user":"` +
		strings.Repeat("u", auditMaxUser-6) + secret + `","roles":["` + strings.Repeat("r", auditMaxRole-6) + secret + `"]}}`
	if _, err := r.env.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: subjects.Exec("local"), Data: []byte(long)}); err != nil {
		t.Fatal(err)
	}

	var all []subjects.AuditEvent
	waitFor(t, "the refusals' decision events", func() bool {
		all = r.auditEventsWhere(func(ev subjects.AuditEvent) bool { return ev.Type == "audit."+subjects.AuditDecision })
		return len(all) >= 5 && strings.Count(logs.String(), "call message dropped") >= 2
	})
	capped := false
	for _, ev := range all {
		if ev.CallID == "qc-caps" {
			capped = true
			for _, f := range []string{ev.Tool, ev.User, strings.Join(ev.Roles, ",")} {
				if !strings.HasSuffix(f, "[redacted]…") {
					t.Errorf("qc-caps: field %.40q… ends %q, want it cut and the secret's start redacted", f, f[max(0, len(f)-20):])
				}
			}
		}
		if data, _ := json.Marshal(ev); strings.Contains(string(data), leak) {
			t.Errorf("audit event holds the start of the secret: %s", data)
		}
	}
	if !capped {
		t.Error("no decision event of qc-caps")
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, leak) {
			t.Errorf("log line holds the start of the secret: %s", line)
		}
	}
}
