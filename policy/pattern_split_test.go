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

// A server name may end in "_" ("files_": its tools are "files___tool"): a pattern written as
// its public names are, "files___delete*", matches them, as it matches the tools "_delete..."
// of a server "files". Split at the first "__" only, it matched the latter alone, and a deny of
// the former's tools silently denied nothing.
func TestMatchToolServerEndingInUnderscore(t *testing.T) {
	p, err := New(&Config{Rules: []Rule{{Allow: []string{"*"}, Deny: []string{"files___delete*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	pr := subjects.Principal{Tenant: "t", User: "u"}
	for _, tc := range []struct {
		server, name string
		allowed      bool
	}{
		{"files_", "delete_all", false},
		{"files", "_delete_all", false},
		{"files", "delete_all", true},
		{"files_", "read", true},
		{"files__", "delete", true}, // not a server name (it holds "__"): "files__" + "__delete"
	} {
		if got := p.Decide(pr, Tool{Server: tc.server, Name: tc.name}).Allowed; got != tc.allowed {
			t.Errorf("%s / %s: allowed = %v, want %v", tc.server, tc.name, got, tc.allowed)
		}
	}
	if !MatchTool("a_*__x", "a_b", "x") || !MatchTool("*___x", "a_", "x") || MatchTool("a__x", "a_", "x") {
		t.Error("server globs and trailing underscores")
	}
}

// A pattern whose server or tool part is empty ("payments__" for "payments__*", "__drop*")
// matches nothing: no server and no tool has an empty name. Like "payments" alone, it is
// refused when the policy is compiled; a deny written with it silently denied nothing.
func TestNewRejectsEmptyPatternParts(t *testing.T) {
	for _, pat := range []string{"payments__", "__drop*", "*__", "__"} {
		if _, err := New(&Config{Rules: []Rule{{Allow: []string{"*"}, Deny: []string{pat}}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("pattern %q: error = %v, want ErrInvalid", pat, err)
		}
		if ValidPattern(pat) {
			t.Errorf("ValidPattern(%q) = true", pat)
		}
	}
	// An empty part that still matches: "___x" is the tools "x" of a server "_" (see
	// TestMatchToolServerEndingInUnderscore), "a___" the tool "_" of server "a".
	for _, pat := range []string{"___x", "a___", "a__*", "*"} {
		if _, err := New(&Config{Rules: []Rule{{Allow: []string{pat}}}}); err != nil {
			t.Errorf("pattern %q: %v", pat, err)
		}
	}
}
