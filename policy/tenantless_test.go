package policy

import (
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A configured principal without a tenant is the local tenant's: it cannot be claimed on
// another tenant's subjects, where it would have acted with its configured roles in any tenant.
func TestPrincipalWithoutTenantIsLocal(t *testing.T) {
	p, err := New(&Config{
		Principals: map[string]PrincipalConfig{"ops": {Roles: []string{"admin"}}},
		Rules:      []Rule{{Name: "admins", Roles: []string{"admin"}, Allow: []string{"*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if pr, err := p.Resolve(subjects.Principal{Tenant: "acme", User: "ops"}); err == nil && pr.Tenant == "acme" {
		t.Errorf("ops on acme resolved to %+v, want refused or the local tenant", pr)
	}
	pr, err := p.Resolve(subjects.Principal{User: "ops"})
	if err != nil || pr.Tenant != Local.Tenant || len(pr.Roles) != 1 {
		t.Errorf("ops on local: %+v, %v", pr, err)
	}
}
