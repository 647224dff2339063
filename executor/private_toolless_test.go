package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestToollessPrivateServerNotTold: a server that holds no tools list (it offers prompts or
// resources only, or its tools were never listed) and whose every list is private to another
// authorization context is hidden from a principal outside that context by the catalog (its
// servers listing leaves it out, its details know no tool of it). A call naming one of its tools
// while it is down was answered "unavailable" with the server's status reason: it told that the
// server exists and why it is down. It is not_found there, as for a server nobody runs; the
// lists' own context, which the catalog shows the server to, is still told it is unavailable.
func TestToollessPrivateServerNotTold(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady, At: time.Now()})
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindPrompts), subjects.Snapshot{
		V: 1, Type: subjects.EventSnapshot, Server: "vault", Kind: subjects.KindPrompts, Fingerprint: "p1", ListedAt: time.Now(), Pages: 1,
		CacheScope: subjects.ScopePrivate, AuthContext: "tenant:beta",
		Items: []json.RawMessage{json.RawMessage(`{"name":"rotationPlan"}`)},
	})
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusUnavailable,
		Code: subjects.CodeConnectionLost, Reason: "vault-db.internal:5432 refused the connection", At: time.Now()})
	waitFor(t, "vault unavailable", func() bool { return r.ex.reg.view.Tool("vault", "listKeys").State == staleness.Unavailable })

	if res := r.call("acme", "vault__listKeys", `{}`, as("alice")); res.Error == nil || res.Error.Code != subjects.CodeNotFound || strings.Contains(res.Error.Message, "vault-db") {
		t.Errorf("acme/alice calls vault__listKeys: got %s %+v, want not_found, as for a server nobody runs", res.Status, res.Error)
	}
	if res := r.call("beta", "vault__listKeys", `{}`, as("bob")); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Errorf("beta/bob calls vault__listKeys: got %s %+v, want unavailable", res.Status, res.Error)
	}
}
