package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRelistedPrivateWhileWaitingNotTold: a call waiting for approval is checked for freshness
// again once approved; the freshness refusal came before the policy's look at the list as it
// stands then. A server whose list became private to another authorization context while the
// call waited, and then went down, was answered "unavailable" with the server's status reason
// to a principal who may no longer see the list, where search, details and any new call say
// the tool does not exist. It is not_found, as for a tool nobody lists.
func TestRelistedPrivateWhileWaitingNotTold(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Approve: []string{"vault__listKeys"}, ApprovalTimeout: 2 * waitLimit}})
	tool := `{"name":"listKeys","inputSchema":{"type":"object"}}`
	snapshot := func(fp, scope, authContext string) {
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{
			V: 1, Type: subjects.EventSnapshot, Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Pages: 1,
			CacheScope: scope, AuthContext: authContext, Items: []json.RawMessage{json.RawMessage(tool)},
		})
	}
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady, At: time.Now()})
	snapshot("f1", subjects.ScopePublic, "")
	r.waitTool("vault__listKeys")

	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "vault-1", Tool: "vault__listKeys", Arguments: json.RawMessage(`{}`), Principal: subjects.Principal{User: "alice"}}
	if _, _, err := r.client.Submit(ctx, "acme", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool {
		for _, ev := range r.auditEvents("acme", req.ID) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})

	// Meanwhile the list becomes beta's own, and the server goes down.
	snapshot("f2", subjects.ScopePrivate, "tenant:beta")
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusUnavailable,
		Code: subjects.CodeConnectionLost, Reason: "vault-db.internal:5432 refused the connection", At: time.Now()})
	waitFor(t, "vault private and unavailable", func() bool {
		v := r.ex.reg.view.Tool("vault", "listKeys")
		return v.State == staleness.Unavailable && v.CacheScope == subjects.ScopePrivate
	})

	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Tenant: "acme", Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "acme", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeNotFound || strings.Contains(res.Error.Message, "vault-db") {
		t.Errorf("acme/alice: got %s %+v, want not_found, as for a tool nobody lists", res.Status, res.Error)
	}
	if res := r.call("acme", "vault__listKeys", `{}`, as("alice")); res.Error == nil || res.Error.Code != subjects.CodeNotFound {
		t.Errorf("a new call: got %s %+v, want not_found", res.Status, res.Error)
	}
}
