package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestOddScopeSnapshotStaysPrivate: a snapshot whose cacheScope is "Private" (another
// publisher copying a server's word as it is) or a word no consumer knows is private to its
// authorization context, as registrysync reads such a list: read as it was, anything but the
// exact "private" was public, and a principal of another context was told the tool exists and
// why its server is down (unavailable) instead of not_found.
func TestOddScopeSnapshotStaysPrivate(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	for i, scope := range []string{"Private", "shared"} {
		server := []string{"vault", "safe"}[i]
		r.publishRegistry(subjects.RegistryStatus(server), subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady, At: time.Now()})
		r.publishRegistry(subjects.RegistrySnapshot(server, subjects.KindTools), subjects.Snapshot{
			V: 1, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(), Pages: 1,
			CacheScope: scope, AuthContext: "tenant:beta",
			Items: []json.RawMessage{json.RawMessage(`{"name":"listKeys","inputSchema":{"type":"object"}}`)},
		})
		r.publishRegistry(subjects.RegistryStatus(server), subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusUnavailable,
			Code: subjects.CodeConnectionLost, Reason: "vault-db.internal:5432 refused the connection", At: time.Now()})
		waitFor(t, server+" unavailable", func() bool { return r.ex.reg.view.Tool(server, "listKeys").State == staleness.Unavailable })

		tool := server + "__listKeys"
		if res := r.call("acme", tool, `{}`, as("alice")); res.Error == nil || res.Error.Code != subjects.CodeNotFound || strings.Contains(res.Error.Message, "vault-db") {
			t.Errorf("cacheScope %q: acme/alice calls %s: got %s %+v, want not_found, as for a tool nobody lists", scope, tool, res.Status, res.Error)
		}
		if res := r.call("beta", tool, `{}`, as("bob")); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
			t.Errorf("cacheScope %q: beta/bob calls %s: got %s %+v, want unavailable", scope, tool, res.Status, res.Error)
		}
	}
}
