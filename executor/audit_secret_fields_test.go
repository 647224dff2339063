package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// A configured secret value is redacted from every field of an audit event, not only from its
// arguments, result and message: the call id, tool, user and roles are the caller's words too
// (and the id is quoted in the needs_approval command). They reached the audit stream verbatim.
// The call's own keys (the results subject, Nats-Msg-Id) keep the id as sent: the event
// carries a redacted copy.
func TestAuditRedactsSecretInEveryField(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}})

	// An allowed call whose id and roles hold the secret: request, decision, result.
	ok := r.call("local", "fixture__echo", `{"text":"hi"}`, func(req *subjects.CallRequest) {
		req.ID = "id-" + secret + "-1"
		req.Principal.Roles = []string{"role-" + secret}
	})
	if ok.Status != subjects.CallOK || ok.ID != "id-"+secret+"-1" {
		t.Fatalf("got %s %+v id %q, want ok with the id as sent", ok.Status, ok.Error, ok.ID)
	}
	// A tool named after the secret (not_found), by a user named after it.
	nf := r.call("local", "x__"+secret, `{}`, func(req *subjects.CallRequest) {
		req.ID = "nf-1"
		req.Principal.User = "user-" + secret
	})
	if nf.Status != subjects.CallRefused {
		t.Fatalf("got %s %+v, want refused", nf.Status, nf.Error)
	}
	// Refused by the front end for its envelope, and on a subject with no valid tenant token.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, subj := range []string{subjects.Exec("local"), subjects.Root + ".exec.a~ZZ"} {
		body := `{"v":2,"id":"fe-` + secret + `","tool":"t-` + secret + `","principal":{"user":"u-` + secret + `","roles":["r-` + secret + `"]}}`
		if _, err := r.env.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: subj, Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}

	var all []subjects.AuditEvent
	waitFor(t, "every call's audit events", func() bool {
		all = r.auditEventsWhere(func(subjects.AuditEvent) bool { return true })
		results, noTenant := 0, 0
		for _, ev := range all {
			if ev.Type == "audit."+subjects.AuditResult {
				results++
			}
			if ev.Tenant == "" && ev.Type == "audit."+subjects.AuditDecision {
				noTenant++
			}
		}
		return results >= 3 && noTenant >= 1
	})
	for _, ev := range all {
		data, _ := json.Marshal(ev)
		if strings.Contains(string(data), secret) {
			t.Errorf("audit event holds the secret: %s", data)
		}
	}
	// The redacted copy still tells the calls apart by what is left of their ids.
	if evs := r.auditEventsWhere(func(ev subjects.AuditEvent) bool { return strings.HasPrefix(ev.CallID, "id-") }); len(evs) != 3 {
		t.Errorf("got %d events of the allowed call, want request, decision and result", len(evs))
	}
}

// lockedBuffer is a bytes.Buffer that log lines may be written to from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The executor's log lines quote a caller's words (a call id, a reply subject, a subject's
// tenant token) redacted of the configured secret values, as audit events do: a request dropped
// for its reply subject, and a call message dropped for its subject, logged them verbatim.
func TestLogRedactsSecretInCallerWords(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}, logTo: logs})
	reply := subjects.Result("local", "id-"+secret)
	if err := r.env.NC.PublishMsg(&nats.Msg{Subject: subjects.Exec("local"), Reply: reply, Data: []byte(`{"id":"x","tool":"fixture__echo"}`)}); err != nil {
		t.Fatal(err)
	}
	// A call message on a subject whose tenant token is no token, holding the secret.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := r.env.JS.Publish(ctx, subjects.Root+".calls."+secret+"~ZZ", []byte(`{"id":"x","tool":"fixture__echo"}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dropped requests' log lines", func() bool {
		return strings.Contains(logs.String(), "call request dropped") && strings.Contains(logs.String(), "call message dropped")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", logs.String())
	}
}
