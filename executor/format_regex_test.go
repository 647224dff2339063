package executor

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// formatRegexSchema asserts "format": "regex" (draft-07 asserts format; see doc.go step 6).
const formatRegexSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {"re": {"type": "string", "format": "regex"}, "more": {"type": "array", "items": {"type": "string", "format": "regex"}}}
}`

// A string checked as "format": "regex" is the caller's: one of 500 KB of \p{L} (seconds of
// parsing, cut off only by the wall-clock backstop, on any number of executors at once) is
// refused invalid_arguments at its path without being parsed, and the strings one validation
// parses as regular expressions add up to at most maxFormatRegexTotal bytes however many there
// are. Counted in bytes handed to a regexp parser, not in time. Short regular expressions, and
// those only ECMAScript reads (a lookahead), still pass; one that is no regular expression fails.
func TestFormatRegexBounded(t *testing.T) {
	var parsed int
	formatRegexParsed = func(n int) { parsed += n }
	t.Cleanup(func() { formatRegexParsed = nil })
	tl := &tool{Public: "grep__search", InputSchema: json.RawMessage(formatRegexSchema)}
	args := func(v map[string]any) []byte { b, _ := json.Marshal(v); return b }

	for _, ok := range []string{`^a+$`, `(?=x)\d{3}`, strings.Repeat(`\p{L}`, maxFormatRegexBytes/5)} {
		if e := validateArgumentsWithin(tl, args(map[string]any{"re": ok}), defaultValidationLimits); e != nil {
			t.Fatalf("%.40q: %+v, want valid", ok, e)
		}
	}
	if e := validateArgumentsWithin(tl, args(map[string]any{"re": "(unclosed"}), defaultValidationLimits); e == nil || e.Path != "/re" {
		t.Fatalf("(unclosed: %+v, want invalid_arguments at /re", e)
	}

	parsed = 0
	huge := strings.Repeat(`\p{L}`, 100_000) // 500 KB
	e := validateArgumentsWithin(tl, args(map[string]any{"re": huge}), defaultValidationLimits)
	if e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/re" || !strings.Contains(e.Message, "longer than") {
		t.Fatalf("500 KB regex: %+v, want invalid_arguments at /re saying it is too long", e)
	}
	if parsed != 0 {
		t.Errorf("500 KB regex: %d bytes parsed, want none", parsed)
	}

	// Many strings, each within the cap: parsing stops at the total.
	parsed = 0
	many := make([]string, 400)
	for i := range many {
		many[i] = strings.Repeat(`\p{L}`, maxFormatRegexBytes/5)
	}
	e = validateArgumentsWithin(tl, args(map[string]any{"more": many}), defaultValidationLimits)
	if e == nil || e.Code != subjects.CodeInvalidArguments || !strings.HasPrefix(e.Path, "/more/") {
		t.Fatalf("400 regexes: %+v, want invalid_arguments in /more", e)
	}
	if parsed > maxFormatRegexTotal {
		t.Errorf("400 regexes: %d bytes parsed, want at most %d", parsed, maxFormatRegexTotal)
	}
	// Groups nested past maxFormatRegexDepth, after a lookahead (only the ECMAScript parser
	// reads it, and its cost grows with the cube of such nesting): refused unparsed.
	parsed = 0
	deep := "(?=a)" + strings.Repeat("(a", 100) + strings.Repeat(")*", 100)
	if e := validateArgumentsWithin(tl, args(map[string]any{"re": deep}), defaultValidationLimits); e == nil || e.Path != "/re" || !strings.Contains(e.Message, "nest") {
		t.Fatalf("deep regex: %+v, want invalid_arguments at /re saying its groups nest too deeply", e)
	}
	if parsed != 0 {
		t.Errorf("deep regex: %d bytes parsed, want none", parsed)
	}
}

// A result's string too costly to check as "format": "regex" is not judged: the result is
// passed on unchecked, the audit result event says why (not protocol_error).
func TestFormatRegexBoundedResult(t *testing.T) {
	tl := &tool{Public: "grep__search", OutputSchema: json.RawMessage(formatRegexSchema)}
	sc, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{"re": strings.Repeat(`\p{L}`, 100_000)}})
	out := checkOutputWithin(tl, sc, defaultValidationLimits)
	if out.fail != nil || !strings.Contains(out.unchecked, "longer than") {
		t.Fatalf("got fail %+v, unchecked %q; want it passed on unchecked, saying the string is too long", out.fail, out.unchecked)
	}
	sc, _ = json.Marshal(map[string]any{"structuredContent": map[string]any{"re": "(unclosed"}})
	if out := checkOutputWithin(tl, sc, defaultValidationLimits); out.fail == nil || out.fail.Path != "/structuredContent/re" {
		t.Fatalf("(unclosed: got fail %+v, unchecked %q; want protocol_error at /structuredContent/re", out.fail, out.unchecked)
	}
}

// checkFormatRegex (parsing only) takes the strings compilePattern compiles, and only those:
// seeded random patterns over an alphabet of regular-expression syntax, Go's and ECMAScript's
// (those within maxFormatRegexTotal's cost: the rest are not checked).
func TestFormatRegexSameAsCompile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	atoms := []string{"a", "(", ")", "[", "]", "^", "-", "*", "+", "?", "{2}", "{1,", "}", "|", ".", `\`, `\d`, `\1`, `\k<n>`,
		"(?=", "(?!", "(?<=", "(?<n>", "(?:", "(?i)", `\p{L}`, `\P{Script=Latin}`, `\u{1F600}`, `\uD83D`, `\x4`, `\c`, "[^]", "[]", `\Q`, `\E`, "[[:alpha:]]", "$", `\b`}
	cases, differ := 0, 0
	for range 800 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		s := b.String()
		if len(s)+foldSets(s, false)*foldSetBytes > maxFormatRegexTotal {
			continue // (not checked, by design: see TestFormatRegexFoldSetsCounted)
		}
		_, cerr := compilePattern(s, nil)
		m := &meteredSchema{regexLeft: maxFormatRegexTotal}
		ferr := checkFormatRegex(s, m)
		cases++
		if (cerr == nil) != (ferr == nil) {
			differ++
			if differ <= 5 {
				t.Errorf("%q: compilePattern error %v, checkFormatRegex error %v", s, cerr, ferr)
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d patterns judged differently", differ, cases)
	}
}
