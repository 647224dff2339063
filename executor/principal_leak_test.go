package executor

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestUnknownPrincipalSaysNothingOfOtherTenants: a publisher on one tenant's subjects learns
// nothing of another tenant's users — not even that they exist. The refusal of a user another
// tenant configures read "does not belong to tenant" (or "is not a principal of", on the local
// tenant), that of a name nobody configures "unknown principal": the difference told which
// names are users of some other tenant. Both are now the same words.
func TestUnknownPrincipalSaysNothingOfOtherTenants(t *testing.T) {
	p, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"dev"}}},
		Rules:      []policy.Rule{{Name: "devs", Roles: []string{"dev"}, Allow: []string{"*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{cfg: Config{Policy: p}, reg: newRegistry(testLogger(t))}
	refusal := func(tenant, user string) string {
		c := &call{tenant: tenant, req: subjects.CallRequest{ID: "c", Tool: "s__t", Principal: subjects.Principal{User: user}}}
		s := e.admit(t.Context(), c)
		if s == nil || s.e == nil || s.e.Code != subjects.CodeUnknownPrincipal {
			t.Fatalf("%s on %s: got %+v, want unknown_principal", user, tenant, s)
		}
		return strings.ReplaceAll(s.e.Message, `"`+user+`"`, "USER")
	}
	for _, tenant := range []string{"beta", policy.Local.Tenant} {
		if alice, mallory := refusal(tenant, "alice"), refusal(tenant, "mallory"); alice != mallory {
			t.Errorf("on %s, a user of another tenant and a name nobody has are told apart:\n  alice:   %s\n  mallory: %s", tenant, alice, mallory)
		}
	}
}
