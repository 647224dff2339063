package policy

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// slowMatch is Match by glob alone, the reference of its fast paths.
func slowMatch(pat, s string) bool {
	ok, err := glob(pat, s)
	return err == nil && ok
}

// TestGlobAsPathMatchWithoutSlash: on patterns and names without '/', glob answers as
// path.Match does, errors included (random patterns over the metacharacters and multi-byte
// runes, 200,000 pairs), but where path.Match's '*' takes a part of a character (see
// TestGlobMatchesCharacters): there glob reads characters.
func TestGlobAsPathMatchWithoutSlash(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alpha := []string{"a", "b", "_", ".", "-", "*", "?", "[", "]", "^", "\\", "é", "\x00", "\xff"}
	word := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alpha[r.IntN(len(alpha))])
		}
		return b.String()
	}
	for range 200_000 {
		pat, s := word(), word()
		got, gerr := glob(pat, s)
		want, werr := path.Match(pat, s)
		if got != want && gerr == nil && utf8.ValidString(pat) && got == refGlob(pat, s) {
			continue // path.Match's '*' took a part of a character
		}
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("glob(%q, %q) = %v, %v; path.Match says %v, %v", pat, s, got, gerr, want, werr)
		}
	}
}

// TestMatchSlashAndNUL: '/' is a character like any other, and NUL is not '/'. Match turned
// '/' into NUL around path.Match: "a/b" matched "a\x00b" and "[+-1]" (which holds '/') did
// not match "/".
func TestMatchSlashAndNUL(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a\x00b", false},
		{"a?b", "a\x00b", true},
		{"a\x00b", "a/b", false},
		{"a*", "a/b/c", true},
		{"*c", "a/b/c", true},
		{"a*c", "a/b/c", true},
		{"a?b", "a/b", true},
		{"a[+-1]b", "a/b", true},
		{"a[^/]b", "a/b", false},
		{"a[^/]b", "a\x00b", true},
		{"a[/]b", "a\x00b", false},
		{"a\\/b", "a/b", true},
	} {
		if got := Match(c.pat, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
	if !ValidPattern("srv/x__[+-1]") || ValidPattern("srv__[/") {
		t.Error("ValidPattern judges '/' apart from other characters")
	}
}

// TestMatchFastPathsAsPathMatch: Match's fast paths (literal, "*", "prefix*", "*suffix") answer
// as glob does, on random patterns and names over a small alphabet with the separators
// and metacharacters that matter.
func TestMatchFastPathsAsPathMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alpha = "ab_/.-*?[]\\"
	word := func(meta bool) string {
		var b strings.Builder
		for range r.IntN(6) {
			c := alpha[r.IntN(len(alpha))]
			if !meta && strings.IndexByte("*?[]\\", c) >= 0 {
				c = 'a'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	for i := range 200_000 {
		pat, s := word(true), word(false)
		switch i % 4 { // the shapes of the fast paths, often
		case 1:
			pat = word(false) + "*"
		case 2:
			pat = "*" + word(false)
		}
		if got, want := Match(pat, s), slowMatch(pat, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, glob says %v", pat, s, got, want)
		}
	}
}

func BenchmarkMatchTool(b *testing.B) {
	for _, pat := range []string{"*", "github__*", "github__create*", "git?ub__[a-c]*"} {
		b.Run(pat, func(b *testing.B) {
			for b.Loop() {
				MatchTool(pat, "github", "create_issue")
			}
		})
	}
}

// TestClassDecidesAlike: principals of one Class get the same decision for every tool, and
// names no rule names collapse into one class.
func TestClassDecidesAlike(t *testing.T) {
	p, err := New(&Config{Rules: []Rule{
		{Name: "staff", Roles: []string{"staff"}, Allow: []string{"kb__*"}},
		{Name: "acme", Tenants: []string{"acme"}, Allow: []string{"crm__*"}},
		{Name: "no mallory", Users: []string{"mallory"}, Deny: []string{"*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"acme", "beta", "mallory", "bob", "staff", "admin", ""}
	var prs []subjects.Principal
	for _, tn := range names {
		for _, u := range names {
			for _, roles := range [][]string{nil, {"staff"}, {"admin"}, {"staff", "admin", "staff"}} {
				prs = append(prs, subjects.Principal{Tenant: tn, User: u, Roles: roles})
			}
		}
	}
	tools := []Tool{{Server: "kb", Name: "get"}, {Server: "crm", Name: "list"}, {Server: "x", Name: "y"}}
	classes := map[string]subjects.Principal{}
	for _, pr := range prs {
		c := p.Class(pr)
		first, seen := classes[c]
		if !seen {
			classes[c] = pr
			continue
		}
		for _, tl := range tools {
			if a, b := p.Decide(pr, tl).Allowed, p.Decide(first, tl).Allowed; a != b {
				t.Fatalf("class %q: %+v and %+v decided apart on %+v", c, pr, first, tl)
			}
		}
	}
	if p.Class(subjects.Principal{Tenant: "t1", User: "u1", Roles: []string{"r1"}}) != p.Class(subjects.Principal{Tenant: "t2", User: "u2", Roles: []string{"r2", "r3"}}) {
		t.Error("names no rule names make classes of their own")
	}
	if len(classes) > 2*2*2*2 {
		t.Errorf("%d classes, want at most 16 (tenant named or not, user named or not, staff or not)", len(classes))
	}
}
