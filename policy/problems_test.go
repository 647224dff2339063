package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestNewReportsEveryProblem: New stopped at the first problem of the configuration, so a user
// fixing a file saw one problem per run. Every problem is reported, each on its own line, in
// a stable order (the principals by key, then the rules in order), each a *Problem that says
// where it is (principal, rule, field, item of the field's list) and ErrInvalid.
func TestNewReportsEveryProblem(t *testing.T) {
	cfg := &Config{
		Principals: map[string]PrincipalConfig{
			"alice":      {Tenant: "acme"},
			"acme/alice": {},
			"/carol":     {},
			"acme/bob":   {Tenant: "globex"},
			"dave":       {Roles: []string{"ok", "r\xff"}},
		},
		Rules: []Rule{
			{Name: "r1", Allow: []string{"kb__*", "github"}, Deny: []string{"x__"}},
			{Users: []string{"acme/x"}, Roles: []string{"adm*"}, Approve: []string{"[x__y", ""}},
		},
	}
	want := []Problem{
		{Code: CodeBadPrincipalKey, Principal: "/carol", Msg: `principal "/carol": want a user name, or tenant/user`},
		{Code: CodeTenantMismatch, Principal: "acme/bob", Field: "tenant", Msg: `principal "acme/bob" has tenant "globex": the key names tenant "acme"`},
		{Code: CodeDuplicatePrincipal, Principal: "alice", Msg: `principals "acme/alice" and "alice": user "alice" of tenant "acme" is configured twice`},
		{Code: CodeNotUTF8, Principal: "dave", Field: "roles", Item: 2, Msg: `principal "dave": role "r\xff" is not valid UTF-8 (names and patterns are text)`},
		{Code: CodeNoToolPart, Rule: 1, RuleName: "r1", Field: "allow", Item: 2, Msg: `rule 1 (r1): pattern "github" matches no tool: patterns are server__tool ("github__*": every tool of server github)`},
		{Code: CodeEmptyPart, Rule: 1, RuleName: "r1", Field: "deny", Item: 1, Msg: `rule 1 (r1): pattern "x__" matches no tool: its server or tool part is empty ("server__*": every tool of a server)`},
		{Code: CodeUserWithTenant, Rule: 2, Field: "users", Item: 1, Msg: `rule 2: users entry "acme/x": users are user names; for user "x" of tenant "acme" write tenants: ["acme"], users: ["x"]`},
		{Code: CodeNameNotExact, Rule: 2, Field: "roles", Item: 1, Msg: `rule 2: roles entry "adm*": names are exact, or "*" for any (globs are for tools)`},
		{Code: CodeBadPattern, Rule: 2, Field: "approve", Item: 1, Msg: `rule 2: bad pattern "[x__y"`},
		{Code: CodeEmptyPattern, Rule: 2, Field: "approve", Item: 2, Msg: `rule 2: empty pattern: patterns are server__tool globs such as "github__*"`},
	}
	for run := 0; run < 5; run++ { // principals are a map: the order must not depend on it
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("New = %v, want ErrInvalid", err)
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("New = %T %v, want an *Error", err, err)
		}
		var got []Problem
		for _, p := range pe.Problems {
			got = append(got, *p)
		}
		if !slices.Equal(got, want) || pe.More != 0 {
			t.Fatalf("problems (and %d more):\n%s\nwant:\n%s", pe.More, fmtProblems(got), fmtProblems(want))
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(want) {
			t.Fatalf("error has %d lines, want %d:\n%s", len(lines), len(want), err)
		}
		for i, w := range want {
			if lines[i] != "invalid policy: "+w.Msg {
				t.Errorf("line %d = %q, want %q", i+1, lines[i], "invalid policy: "+w.Msg)
			}
		}
		// Each problem on its own is ErrInvalid too, and found by errors.As.
		var p *Problem
		if !errors.As(err, &p) || p.Code != want[0].Code || !errors.Is(p, ErrInvalid) {
			t.Errorf("errors.As(*Problem) = %+v, want the first problem, ErrInvalid", p)
		}
	}
}

func fmtProblems(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %+v\n", p)
	}
	return b.String()
}

// TestNewBoundsProblems: a file with thousands of bad patterns is not thousands of lines: the
// first MaxProblems, then how many more.
func TestNewBoundsProblems(t *testing.T) {
	var pats []string
	for i := 0; i < MaxProblems+7; i++ {
		pats = append(pats, fmt.Sprintf("server%d", i))
	}
	_, err := New(&Config{Rules: []Rule{{Name: "many", Allow: pats}}})
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Problems) != MaxProblems || pe.More != 7 {
		t.Fatalf("New = %v; want %d problems and 7 more", err, MaxProblems)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxProblems+1 || lines[MaxProblems] != "invalid policy: and 7 more problems" ||
		!strings.HasPrefix(lines[0], `invalid policy: rule 1 (many): pattern "server0" matches no tool`) {
		t.Errorf("error:\n%s", err)
	}
}

// TestNewOneProblemPerEntry: an entry is reported once, for its first problem: a pattern that is
// not UTF-8 is not also "no tool part".
func TestNewOneProblemPerEntry(t *testing.T) {
	_, err := New(&Config{Rules: []Rule{{Allow: []string{"k\xff"}}}})
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Code != CodeNotUTF8 || pe.Problems[0].Item != 1 {
		t.Errorf("New = %v; want one not_utf8 problem", err)
	}
}

// TestNewProblemsCutLongValues: a problem quotes the name or pattern it is about, and a file
// may repeat one value of megabytes many times (a YAML alias costs three bytes): each of
// MaxProblems problems quoted it in full (a pattern three times over, its rule's name once
// more), hundreds of megabytes of message for a 4 MiB file. What is quoted is cut.
func TestNewProblemsCutLongValues(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	bad := "\xff" + big
	cfg := &Config{
		Principals: map[string]PrincipalConfig{
			"acme/u":      {Tenant: big},          // tenant mismatch
			"/" + big:     {},                     // bad key
			"a" + big:     {Roles: []string{bad}}, // role not UTF-8
			"acme/" + big: {},                     // }
			big:           {Tenant: "acme"},       // } configured twice
		},
		Rules: []Rule{
			{Name: big, Allow: []string{big, big, big}}, // no tool part: quoted three times
			{Name: bad, Users: []string{big + "/" + big, "*" + big}, Deny: []string{"[" + big, big + "__"}},
			{Name: "more", Allow: slices.Repeat([]string{big}, MaxProblems)},
		},
	}
	_, err := New(cfg)
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Problems) != MaxProblems || pe.More == 0 {
		t.Fatalf("New = %.300v; want %d problems and more", err, MaxProblems)
	}
	codes := map[string]bool{}
	for _, p := range pe.Problems {
		codes[p.Code] = true
		if len(p.Msg) > 4<<10 {
			t.Errorf("%s problem of %d bytes: %.300s", p.Code, len(p.Msg), p.Msg)
		}
	}
	if len(codes) != 9 {
		t.Errorf("problems of %d kinds, want 9: %v", len(codes), codes)
	}
	if !strings.Contains(pe.Problems[0].Msg, "x…") {
		t.Errorf("a cut value is not marked: %.300s", pe.Problems[0].Msg)
	}
}
