package policy

import (
	"errors"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A pattern that is a valid glob as a whole but not once split at its first "__" (as MatchTool
// matches it) is refused when the policy is compiled: it would match nothing, and a deny
// written with it would silently deny nothing.
func TestNewRejectsPatternsBadOnceSplit(t *testing.T) {
	for _, pat := range []string{`[a__b]*`, `pay\__*`, `x__[`} {
		_, err := New(&Config{Rules: []Rule{{Allow: []string{"*"}, Deny: []string{pat}}}})
		if !errors.Is(err, ErrInvalid) {
			p, _ := New(&Config{Rules: []Rule{{Allow: []string{"*"}, Deny: []string{pat}}}})
			d := p.Decide(subjects.Principal{Tenant: "t", User: "u"}, Tool{Server: "a", Name: "b"})
			t.Errorf("pattern %q: error = %v, want ErrInvalid (Decide: %+v)", pat, err, d)
		}
	}
}

// A rule's tenants, users and roles are exact names (or "*"): a glob there never matched, so a
// deny for "contractor-*" silently denied nothing. It is refused when the policy is compiled.
func TestNewRejectsGlobNames(t *testing.T) {
	for _, r := range []Rule{
		{Users: []string{"contractor-*"}, Deny: []string{"*"}},
		{Tenants: []string{"acme?"}, Deny: []string{"*"}},
		{Roles: []string{"[ab]dmin"}, Allow: []string{"*"}},
		{Users: []string{""}, Allow: []string{"*"}},
	} {
		if _, err := New(&Config{Rules: []Rule{r}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("rule %+v: error = %v, want ErrInvalid", r, err)
		}
	}
	if _, err := New(&Config{Rules: []Rule{{Users: []string{"*"}, Tenants: []string{"acme"}, Roles: []string{"admin"}, Allow: []string{"*"}}}}); err != nil {
		t.Errorf("exact names and \"*\": %v", err)
	}
}
