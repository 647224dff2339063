package policy

import (
	"fmt"
	"strings"
)

// Codes of the problems New reports (Problem.Code): stable, for callers and tests to tell them
// apart without matching messages.
const (
	CodeNotUTF8            = "not_utf8"            // a name or pattern that is not UTF-8
	CodeNameNotExact       = "name_not_exact"      // a rule's tenants, users or roles entry empty or a glob
	CodeUserWithTenant     = "user_with_tenant"    // a rule's users entry "tenant/user"
	CodeEmptyPattern       = "empty_pattern"       // an allow, deny or approve entry ""
	CodeNoToolPart         = "no_tool_part"        // a pattern without "__" nor glob ("github")
	CodeEmptyPart          = "empty_part"          // a pattern whose server or tool part is empty ("github__")
	CodeBadPattern         = "bad_pattern"         // a pattern that is no valid glob
	CodeEmptyPrincipal     = "empty_principal"     // a principal key ""
	CodeBadPrincipalKey    = "bad_principal_key"   // a principal key that is neither user nor tenant/user
	CodeTenantMismatch     = "tenant_mismatch"     // a "tenant/user" key with another tenant: field
	CodeDuplicatePrincipal = "duplicate_principal" // one user of one tenant under two keys
)

// MaxProblems bounds the problems New lists: a file of thousands of bad patterns is reported
// as its first MaxProblems, and how many more (Error.More).
const MaxProblems = 20

// Problem is one problem of a policy configuration, and where it is, so that a caller that
// knows where the configuration was written (a file's lines) can point at it. It is
// ErrInvalid.
type Problem struct {
	Code string // one of the Code* constants
	// Rule is the rule's position, from 1; 0 for a principal's problem, whose key is Principal.
	Rule      int
	RuleName  string
	Principal string
	// Field is the rule's or principal's field ("allow", "users", "tenant", "roles", "name");
	// "" for the rule or principal as a whole (a principal's key). Item is the entry of
	// Field's list, from 1; 0 for the field as a whole.
	Field string
	Item  int
	// Msg is the problem as one line, with its place ("rule 2 (no deletes): bad pattern ..."),
	// and what to write instead where that is known.
	Msg string
}

func (p *Problem) Error() string { return ErrInvalid.Error() + ": " + p.Msg }

func (p *Problem) Unwrap() error { return ErrInvalid }

// Error is what New returns for a configuration it refuses: its problems, at most MaxProblems,
// in a stable order (the principals by key, then the rules in order, each's fields in the
// order of Rule), one a line. errors.Is(err, ErrInvalid) holds, and errors.As finds each
// *Problem.
type Error struct {
	Problems []*Problem
	More     int // problems found past Problems
}

func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	for _, p := range e.Problems {
		lines = append(lines, p.Error())
	}
	if e.More > 0 {
		lines = append(lines, fmt.Sprintf("%s: and %d more problems", ErrInvalid, e.More))
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems listed.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects the problems New finds: the first MaxProblems, and a count of the others
// (a configuration of a million bad patterns holds only that many).
type problems struct{ Error }

func (ps *problems) add(p *Problem) {
	if len(ps.Problems) < MaxProblems {
		ps.Problems = append(ps.Problems, p)
	} else {
		ps.More++
	}
}

// err is the problems as New's error, nil when there are none.
func (ps *problems) err() error {
	if len(ps.Problems) == 0 {
		return nil
	}
	return &ps.Error
}

// rulePlace names rule i (from 1) in messages: "rule 2 (no deletes)", or "rule 2" for a rule
// without a name, as Warning.Rule does (the name cut, see shown: every problem of the rule
// holds it).
func rulePlace(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("rule %d", i)
	}
	return fmt.Sprintf("rule %d (%s)", i, shown(name))
}

// maxShown bounds, in runes, a name or pattern a problem quotes: well past a server name (at
// most 64 bytes) and a tool name together, so only a value nobody reads in full is cut.
const maxShown = 256

// shown is s as a problem quotes it: its first maxShown runes, "…" marking a cut. A file may
// repeat one value of megabytes many times (a YAML alias is three bytes), and each of the
// MaxProblems problems quoted it in full, some several times over: hundreds of megabytes of
// message for a 4 MiB file. Runes as range reads them: a byte that is not UTF-8 counts as one.
func shown(s string) string {
	runes := 0
	for i := range s {
		if runes == maxShown {
			return s[:i] + "…"
		}
		runes++
	}
	return s
}
