package executor

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestPatternECMASemantics: a pattern Go's regexp compiles ran with Go's meaning of ".", "\s"
// and "\S", which is not ECMA-262's, the one JSON Schema (and ajv, which TypeScript MCP
// servers validate with) gives patterns: in ECMAScript "\s" is every Unicode space separator
// plus \v, U+FEFF, U+2028 and U+2029 (Go: only [\t\n\f\r ]), and "." matches neither "\r" nor
// U+2028/U+2029 (Go: everything but "\n"). So "^\S+$" let "a\u00a0b" through, "^\s*$" refused
// a no-break space, and "^.+$" let "a\rb" through. The verdicts below are ajv's (8.x, u flag).
func TestPatternECMASemantics(t *testing.T) {
	cases := []struct {
		pattern, value string
		valid          bool
	}{
		{`^\S+$`, "a\u00a0b", false},
		{`^\S+$`, "a\u2028b", false},
		{`^\S+$`, "\ufeff", false},
		{`^\S+$`, "\v", false},
		{`^\S+$`, "abc", true},
		{`^[^\s]+$`, "a\u3000b", false},
		{`^[\S]+$`, "a\u2000b", false},
		{`^[\S]+$`, "é😀", true},
		{`^[^\S]+$`, "\u00a0\u205f", true},
		{`^[\S]+$`, "\u0085\u180e\u200b", true}, // not ECMAScript white space
		{`^\s*$`, "\u00a0\u1680\u2000\u200a\u202f\u205f\u3000\ufeff\u2028\u2029\v\t\n\f\r ", true},
		{`^\s*$`, "\u200b", false},
		{`^[\w\s]+$`, "a\u00a0b", true},
		{`^[\d\s-]+$`, "1\u00a02", true},
		{`^.+$`, "a\rb", false},
		{`^.+$`, "a\u2028b", false},
		{`^.+$`, "a\u2029b", false},
		{`^.+$`, "a\tb😀\u0085", true},
		{`^a.c$`, "a\rc", false},
		{`^[.]$`, ".", true}, // in a class, "." is itself
		{`^[.]$`, "x", false},
		{`^\.$`, "x", false},
		{`^\\s$`, `\s`, true}, // an escaped backslash, then "s"
		{`^\\.$`, "\\\r", false},
		{`^[^]+[ab]$`, "xa", true}, // ECMAScript's [^] is any character (to Go: a class up to the next ])
		{`^[^]+[ab]$`, "x", false},
		// "[]x]" and "[^]]" are not ECMAScript with the u flag (a lone "]"; ajv refuses
		// them): Go's meaning, "]" or "x" and anything but "]", as before, not Annex B's
		// (an empty class, any character) that no server's validator reads.
		{`^[]x]$`, "x", true},
		{`^[]x]$`, "]", true},
		{`^[^]]+$`, "abc", true},
		{`^[^]]+$`, "a]", false},
		{`^[[:alpha:].]+$`, "a.", true}, // Go's POSIX class: its "]" does not end the class
		// Patterns only the ECMAScript engine compiles are compiled with the u flag, as ajv
		// does: a surrogate pair is one character, \u{...} and \p{Script=...} are read.
		{`^\ud83d\ude00$`, "😀", true},
		{`^[\ud83d\ude00-\ud83d\ude4f]$`, "🙂", true},
		{`^\u{1F600}$`, "😀", true},
		{`^\p{Script=Greek}+$`, "αβγ", true},
		{`^\p{Script=Greek}+$`, "abc", false},
		{`^(?=.)\s$`, "\u00a0", true},
		{`^(?!x).$`, "\r", false},
		{`^(?=#)\#$`, "#", true},   // not valid with the u flag: read as without it
		{`^\Q.\s\E$`, `.\s`, true}, // Go's quoted text stays literal
		// A "-" after \s in a class is a literal "-" (to Go and ECMAScript alike), not the
		// start of a range from the last space of the expansion.
		{`^[\s-😀]$`, "-", true},
		{`^[\s-😀]$`, "\uffff", false},
		{`^[\s-😀]$`, "\U00010000", false},
		// Only a Go flag group turns ECMAScript's "." off: not "(?s)" in a class, after an
		// escaped "(" or inside \Q...\E.
		{`^[(?s)].$`, "(\r", false},
		{`^\(?s:.$`, "s:\r", false},
		{`^\Q(?s)\E.$`, "(?s)\r", false},
		{`^(?s).$`, "\r", true},
	}
	for _, c := range cases {
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string", "pattern": c.pattern}}})
		args, _ := json.Marshal(map[string]any{"s": c.value})
		tl := &tool{Public: "s__t", InputSchema: schema}
		e := validateArguments(tl, args)
		if c.valid && e != nil {
			t.Errorf("pattern %s, value %q: got %+v, want valid", c.pattern, c.value, e)
		}
		if !c.valid && (e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/s") {
			t.Errorf("pattern %s, value %q: got %+v, want invalid_arguments at /s", c.pattern, c.value, e)
		}
		if e != nil && e.Code == subjects.CodeInvalidArguments {
			if want := "does not match pattern '" + c.pattern + "'"; !strings.Contains(e.Message, want) {
				t.Errorf("pattern %s: message %q does not name the pattern as written", c.pattern, e.Message)
			}
		}
	}

	// patternProperties and propertyNames use the same engine.
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","patternProperties":{"^\\S+$":{"type":"integer"}},"additionalProperties":false}`)}
	if e := validateArguments(tl, []byte("{\"a\u00a0b\":1}")); e == nil || e.Code != subjects.CodeInvalidArguments {
		t.Errorf("patternProperties ^\\S+$ with a no-break space in the name: got %+v, want invalid_arguments", e)
	}
	tl = &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","propertyNames":{"pattern":"^.+$"}}`)}
	if e := validateArguments(tl, []byte(`{"a\rb":1}`)); e == nil || e.Code != subjects.CodeInvalidArguments {
		t.Errorf("propertyNames ^.+$ with a carriage return in the name: got %+v, want invalid_arguments", e)
	}
}

// TestPatternRewriteStaysGo: goSyntax's rewriting of a pattern Go compiles compiles too, so
// the engine (and the meaning of what only Go reads) stays Go's: a "-" after \s in a class
// made the expansion's last space the start of a range ("[\s-z]" did not compile, "[\s-😀]"
// took in U+FEFF..U+1F600).
func TestPatternRewriteStaysGo(t *testing.T) {
	for _, p := range []string{`[\s-z]`, `[\s--]`, `[\s-\d]`, `[a\s-]`, `[^\s-\S]`, `(?i)[\s-k]`} {
		if _, err := regexp.Compile(p); err != nil {
			t.Fatalf("%s: Go does not compile it: %v", p, err)
		}
		re, ok := goSyntax(p)
		if !ok {
			t.Errorf("%s: goSyntax refused it", p)
			continue
		}
		if _, err := regexp.Compile(re); err != nil {
			t.Errorf("%s: rewritten, Go does not compile it: %v", p, err)
		}
	}
}

// A pattern whose rewriting into ECMAScript's meanings would grow it by more than
// maxPatternRewriteGrowth (thousands of \s, \S or .: only a hostile definition writes them)
// keeps Go's meaning rather than cost memory in proportion to compile; it still compiles, on
// Go's linear-time engine.
func TestPatternRewriteGrowthBounded(t *testing.T) {
	small, _ := goSyntax(`\s`)
	n := maxPatternRewriteGrowth/(len(small)-len(`\s`)) + 2
	huge := "^" + strings.Repeat(`\s`, n) + "$"
	re, err := compilePattern(huge, nil)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	p, ok := re.(goPattern)
	if !ok {
		t.Fatalf("engine %T, want Go's regexp", re)
	}
	if p.re.String() != huge || p.String() != huge {
		t.Errorf("the huge pattern was rewritten (%d bytes)", len(p.re.String()))
	}
	if !re.MatchString(strings.Repeat(" ", n)) || re.MatchString(strings.Repeat("\u00a0", n)) {
		t.Error("Go's \\s meaning not kept")
	}
	// Below the bound the rewriting applies.
	few := "^" + strings.Repeat(`\s`, 8) + "$"
	re, err = compilePattern(few, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !re.MatchString(strings.Repeat("\u00a0", 8)) {
		t.Error("ECMAScript's \\s not applied below the bound")
	}
}
