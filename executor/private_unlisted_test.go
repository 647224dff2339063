package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestUnkeptToolOfPrivateListNotTold: a tool that a private list of another authorization
// context holds but the executor does not keep (its definition too large, say), of a server
// that is down, was answered "unavailable" with the server's status reason to a principal who
// may not see the list: a call told that the tool exists there, and why its server is down,
// where search, details and a call of any of the list's kept tools say it does not exist. It is
// not_found, as for a tool nobody lists; the list's own context still learns that the tools the
// list keeps are unavailable.
func TestUnkeptToolOfPrivateListNotTold(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	huge := `{"name":"rotateKeys","description":"` + strings.Repeat("x", subjects.MaxDefinitionBytes) + `","inputSchema":{"type":"object"}}`
	small := `{"name":"listKeys","inputSchema":{"type":"object"}}`
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady, At: time.Now()})
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{
		V: 1, Type: subjects.EventSnapshot, Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(), Pages: 1,
		CacheScope: subjects.ScopePrivate, AuthContext: "tenant:beta",
		Items: []json.RawMessage{json.RawMessage(huge), json.RawMessage(small)},
	})
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusUnavailable,
		Code: subjects.CodeConnectionLost, Reason: "vault-db.internal:5432 refused the connection", At: time.Now()})
	waitFor(t, "vault unavailable", func() bool { return r.ex.reg.view.Tool("vault", "listKeys").State == staleness.Unavailable })

	for _, tool := range []string{"vault__rotateKeys", "vault__listKeys", "vault__nosuch"} {
		res := r.call("acme", tool, `{}`, as("alice"))
		if res.Error == nil || res.Error.Code != subjects.CodeNotFound || strings.Contains(res.Error.Message, "vault-db") {
			t.Errorf("acme/alice calls %s: got %s %+v, want not_found, as for a tool nobody lists", tool, res.Status, res.Error)
		}
	}
	// The list's own context is told of what the list keeps; the unkept definition is in no
	// list (staleness.View leaves it out, as the catalog does): not_found, as its details say and
	// as a call of it says while vault is up.
	if res := r.call("beta", "vault__listKeys", `{}`, as("bob")); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Errorf("beta/bob calls listKeys: got %s %+v, want unavailable", res.Status, res.Error)
	}
	if res := r.call("beta", "vault__rotateKeys", `{}`, as("bob")); res.Error == nil || res.Error.Code != subjects.CodeNotFound || strings.Contains(res.Error.Message, "vault-db") {
		t.Errorf("beta/bob calls rotateKeys: got %s %+v, want not_found", res.Status, res.Error)
	}
}
