package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSameUserInTwoTenants: principals were keyed by user name alone, so one name ("admin")
// could be configured in one tenant only. A "tenant/user" key configures it in each tenant, with
// roles of its own; a request is resolved in the tenant it comes from.
func TestSameUserInTwoTenants(t *testing.T) {
	p, err := New(&Config{
		Principals: map[string]PrincipalConfig{
			"acme/admin": {Roles: []string{"acme-admin"}},
			"beta/admin": {Tenant: "beta", Roles: []string{"beta-admin"}},
			"carol":      {Tenant: "acme", Roles: []string{"dev"}},
		},
		Rules: []Rule{{Roles: []string{"acme-admin", "beta-admin"}, Allow: []string{"*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in         subjects.Principal
		tenant     string
		roles      []string
		unknownErr bool
	}{
		{in: subjects.Principal{Tenant: "acme", User: "admin"}, tenant: "acme", roles: []string{"acme-admin"}},
		{in: subjects.Principal{Tenant: "beta", User: "admin", Roles: []string{"acme-admin"}}, tenant: "beta", roles: []string{"beta-admin"}},
		{in: subjects.Principal{Tenant: "gamma", User: "admin"}, unknownErr: true},
		// Asked for as of the local tenant: admin is in two tenants, nobody's in particular;
		// carol in one, whose tenant comes back (a caller pinning a tenant compares it).
		{in: subjects.Principal{User: "admin"}, unknownErr: true},
		{in: subjects.Principal{User: "carol"}, tenant: "acme", roles: []string{"dev"}},
		{in: subjects.Principal{Tenant: "beta", User: "carol"}, unknownErr: true},
		// The key's whole text is no user name.
		{in: subjects.Principal{Tenant: "local", User: "acme/admin"}, unknownErr: true},
	} {
		got, err := p.Resolve(c.in)
		if c.unknownErr {
			if !errors.Is(err, ErrUnknownPrincipal) {
				t.Errorf("Resolve(%+v) = %+v, %v; want unknown_principal", c.in, got, err)
			}
			continue
		}
		if err != nil || got.Tenant != c.tenant || !slices.Equal(got.Roles, c.roles) {
			t.Errorf("Resolve(%+v) = %+v, %v; want tenant %s, roles %v", c.in, got, err, c.tenant, c.roles)
		}
	}
}

func TestTenantUserKeysRefused(t *testing.T) {
	for key, cfg := range map[string]*Config{
		"twice":          {Principals: map[string]PrincipalConfig{"alice": {Tenant: "acme"}, "acme/alice": {}}},
		"twice local":    {Principals: map[string]PrincipalConfig{"alice": {}, "local/alice": {}}},
		"other tenant":   {Principals: map[string]PrincipalConfig{"acme/alice": {Tenant: "beta"}}},
		"no tenant":      {Principals: map[string]PrincipalConfig{"/alice": {}}},
		"no user":        {Principals: map[string]PrincipalConfig{"acme/": {}}},
		"two separators": {Principals: map[string]PrincipalConfig{"acme/a/b": {}}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", key, err)
		} else if !strings.Contains(err.Error(), "principal") {
			t.Errorf("%s: %v does not name the principal", key, err)
		}
	}
}

// TestTenantUserKeyDigest: "acme/alice" and alice with tenant acme are one principal: one
// digest; the same name in two tenants differs from either alone.
func TestTenantUserKeyDigest(t *testing.T) {
	digest := func(ps map[string]PrincipalConfig) string {
		p, err := New(&Config{Principals: ps, Rules: []Rule{{Roles: []string{"r"}, Allow: []string{"*"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Digest()
	}
	a := digest(map[string]PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"r"}}})
	b := digest(map[string]PrincipalConfig{"acme/alice": {Roles: []string{"r"}}})
	c := digest(map[string]PrincipalConfig{"acme/alice": {Tenant: "acme", Roles: []string{"r"}}})
	both := digest(map[string]PrincipalConfig{"acme/alice": {Roles: []string{"r"}}, "beta/alice": {Roles: []string{"r"}}})
	if a != b || b != c {
		t.Errorf("one principal written three ways: digests %s %s %s", a, b, c)
	}
	if both == a {
		t.Errorf("alice in two tenants has the digest of alice in one")
	}
}

// TestRuleUserWithTenantRefused: principals may now be written "tenant/user", and --principal
// reads so, but a rule's users are user names: a rule naming "beta/admin" applied to nobody, so
// a deny written with one silently denied nothing (as a glob there would). It is refused.
func TestRuleUserWithTenantRefused(t *testing.T) {
	cfg := &Config{
		Principals: map[string]PrincipalConfig{"acme/admin": {Roles: []string{"admin"}}, "beta/admin": {Roles: []string{"admin"}}},
		Rules: []Rule{
			{Name: "admins", Roles: []string{"admin"}, Allow: []string{"*"}},
			{Name: "not beta's admin", Users: []string{"beta/admin"}, Deny: []string{"github__*"}},
		},
	}
	p, err := New(cfg)
	if err == nil {
		pr, _ := p.Resolve(subjects.Principal{Tenant: "beta", User: "admin"})
		t.Fatalf("New accepted a rule for user %q; it decides %+v for beta's admin", "beta/admin", p.Decide(pr, Tool{Server: "github", Name: "merge"}))
	}
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"beta/admin"`) || !strings.Contains(err.Error(), "tenants") {
		t.Errorf("New = %v; want ErrInvalid naming the entry and pointing to tenants", err)
	}
	// Without principals (roles and users from the request), too: --principal beta/admin is
	// user admin of tenant beta.
	cfg.Principals = nil
	if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
		t.Errorf("without principals: New = %v, want ErrInvalid", err)
	}
}

// TestDuplicatePrincipalNamesBothKeys: the refusal of one (tenant, user) configured twice names
// both keys that configure it, not only one.
func TestDuplicatePrincipalNamesBothKeys(t *testing.T) {
	_, err := New(&Config{Principals: map[string]PrincipalConfig{"alice": {Tenant: "acme"}, "acme/alice": {}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"alice"`) || !strings.Contains(err.Error(), `"acme/alice"`) {
		t.Errorf("New = %v; want ErrInvalid naming both \"alice\" and \"acme/alice\"", err)
	}
}
