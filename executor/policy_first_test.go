package executor

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// The principal and the policy are checked before anything about the tool is told or done for
// it: a principal the policy does not know, or one that may not call the tool, learns nothing
// of its state (stale, revoked and why, unavailable) and makes no re-list of its server.
func TestPolicyBeforeFreshness(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	relists := &counter{}
	r.startExecutor(Config{Policy: testPolicy(t), Dispatcher: r.mgr, Relister: countingRelister{inner: r.mgr, n: relists}}, r.env.NC)
	r.waitTool("fixture__echo")
	r.publishRegistry(subjects.RegistryRevoked("fixture"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "fixture",
		Tools: []string{"exit"}, Reason: "incident 42", At: time.Now()})
	waitFor(t, "revocation applied", func() bool { return r.ex.reg.view.Tool("fixture", "exit").State == "revoked" })
	// The fixture's list has ttlMs 400.
	waitFor(t, "ttl expired", func() bool { return r.ex.reg.view.Tool("fixture", "echo").State == "expired" })

	cases := []struct {
		name, tenant, user, tool, code string
	}{
		{"unknown principal, revoked tool", "acme", "mallory", "fixture__exit", subjects.CodeUnknownPrincipal},
		{"unknown principal, unknown tool", "acme", "mallory", "fixture__nosuch", subjects.CodeUnknownPrincipal},
		{"principal of another tenant, revoked tool", "local", "alice", "fixture__exit", subjects.CodeUnknownPrincipal},
		{"no rule allows, revoked tool", "acme", "bob", "fixture__exit", subjects.CodeForbidden},
		{"no rule allows, expired list", "acme", "bob", "fixture__echo", subjects.CodeForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.call(tc.tenant, tc.tool, `{"text":"x"}`, as(tc.user))
			if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != tc.code {
				t.Fatalf("got %s %+v, want refused %s", res.Status, res.Error, tc.code)
			}
			if strings.Contains(res.Error.Message, "revoked") || res.Error.Reason != "" {
				t.Errorf("the refusal tells the tool's state: %+v", res.Error)
			}
		})
	}
	if got := relists.get("fixture"); got != 0 {
		t.Errorf("got %d re-lists of fixture for principals that may not call it, want 0", got)
	}
	// The one who may call it still gets the state.
	if res := r.call("acme", "fixture__exit", `{}`, as("alice")); res.Error == nil || res.Error.Code != subjects.CodeStale || !strings.Contains(res.Error.Message, "revoked") {
		t.Errorf("alice: got %s %+v, want stale (revoked)", res.Status, res.Error)
	}
}
