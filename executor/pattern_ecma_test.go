package executor

import (
	"encoding/json"
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
		{`^[]x]$`, "x", false},          // ECMAScript's [] matches nothing
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
