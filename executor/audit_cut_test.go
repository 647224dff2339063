package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestAuditMessageCutSecretRedacted: an audit event's message is redacted as it is emitted, but
// the words it quotes were cut to size before (a member name at 200 bytes, say): a configured
// secret that straddled the cut was no longer whole there, and the audit kept its first bytes.
func TestAuditMessageCutSecretRedacted(t *testing.T) {
	const secret = "sk-live-AuditCut0123456789"
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}})
	// The member's name is quoted as a JSON pointer ("/" + name), cut at 200 bytes: the secret
	// starts at byte 185 of it.
	key := strings.Repeat("k", 184) + secret
	res := r.call("local", "fixture__echo", `{"text":"x",`+string(mustJSON(t, key))+`:1,`+string(mustJSON(t, key))+`:2}`)
	if res.Status == subjects.CallOK {
		t.Fatalf("got %s, want the duplicate member refused", res.Status)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "the decision", func() bool {
		evs = r.auditEvents("local", res.ID)
		for _, ev := range evs {
			if ev.Type == "audit."+subjects.AuditDecision {
				return true
			}
		}
		return false
	})
	all, _ := json.Marshal(evs)
	if strings.Contains(string(all), secret[:12]) {
		t.Errorf("audit events hold the start of the secret (%q): %s", secret[:12], all)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
