package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpstream/mcpstream/subjects"
)

// nestedGroups is a pattern Go's regexp refuses (a lookahead), so that regexp2 parses it,
// with n nested quantified groups: regexp2's parser takes time with the cube of n (4 KiB,
// n = 1000: a minute of CPU, once per compiled copy of the schema).
func nestedGroups(n int) string {
	return "(?=a)" + strings.Repeat("(a", n) + strings.Repeat(")*", n)
}

// TestSchemaPatternNestingRefused: a server's own pattern (or patternProperties key) that nests
// groups beyond maxFormatRegexDepth, and that only regexp2 would compile, is not compiled: the
// tool's inputSchema cannot be used (invalid_schema, as for a pattern that does not compile),
// with a message naming the bound; its outputSchema is passed over the same way. Before the
// bound the compile succeeded after regexp2's cubic parse (the test ran past its -timeout).
func TestSchemaPatternNestingRefused(t *testing.T) {
	hostile := nestedGroups(1100)
	if len(hostile) < 4<<10 || len(hostile) > maxSchemaPatternBytes {
		t.Fatalf("pattern of %d bytes", len(hostile))
	}
	q, _ := json.Marshal(hostile)
	want := "nests groups more than 32 levels deep"
	for _, schema := range []string{
		`{"type":"object","properties":{"s":{"type":"string","pattern":` + string(q) + `}}}`,
		`{"type":"object","patternProperties":{` + string(q) + `:{"type":"string"}}}`,
		`{"type":"object","properties":{"s":{"propertyNames":{"pattern":` + string(q) + `}}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"s":{"pattern":` + string(q) + `}}}`,
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		e := validateArguments(tl, []byte(`{"s":"a"}`))
		if e == nil || e.Code != subjects.CodeInvalidSchema || !strings.Contains(e.Message, want) {
			t.Errorf("%.80s…: got %+v, want invalid_schema naming %q", schema, e, want)
		} else if len(e.Message) > 1024 {
			t.Errorf("message of %d bytes", len(e.Message))
		}
		// Every later call gets the same answer, without compiling again.
		if e2 := validateArguments(tl, []byte(`{}`)); e2 == nil || e == nil || e2.Message != e.Message {
			t.Errorf("second call: got %+v", e2)
		}
		out := &tool{Public: "s__t", OutputSchema: json.RawMessage(schema)}
		if oc := checkOutput(out, []byte(`{"structuredContent":{"s":"a"}}`)); !oc.unusable || !strings.Contains(oc.unchecked, want) {
			t.Errorf("outputSchema %.80s…: got %+v, want unusable naming %q", schema, oc, want)
		}
	}
	// A pattern Go compiles keeps Go's meaning however deeply it nests (Go's parser is linear
	// in the nesting): nothing is refused.
	deep := "^" + strings.Repeat("(a", 200) + strings.Repeat(")?", 200) + "$"
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","pattern":"` + deep + `"}}}`)}
	if e := validateArguments(tl, []byte(`{"s":"aaa"}`)); e != nil {
		t.Errorf("deep Go pattern, matching value: %+v", e)
	}
	if e := validateArguments(tl, []byte(`{"s":"b"}`)); e == nil || e.Code != subjects.CodeInvalidArguments {
		t.Errorf("deep Go pattern, value that does not match: got %+v, want invalid_arguments", e)
	}
}

// TestSchemaPatternLengthRefused: a pattern longer than maxSchemaPatternBytes is not compiled,
// by either engine.
func TestSchemaPatternLengthRefused(t *testing.T) {
	long := "^(" + strings.Repeat("abcdefg|", maxSchemaPatternBytes/8) + "z)$"
	want := "longer than the 16384 bytes the executor compiles as a pattern"
	for _, schema := range []string{
		`{"type":"object","properties":{"s":{"type":"string","pattern":"` + long + `"}}}`,
		`{"type":"object","patternProperties":{"` + long + `":{"type":"string"}}}`,
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		e := validateArguments(tl, []byte(`{"s":"z"}`))
		if e == nil || e.Code != subjects.CodeInvalidSchema || !strings.Contains(e.Message, want) {
			t.Errorf("%.60s…: got %+v, want invalid_schema naming %q", schema, e, want)
		}
	}
	// At the bound it compiles (Go's engine) and validates.
	ok := "^(" + strings.Repeat("abcdefg|", (maxSchemaPatternBytes-5)/8) + "z)$"
	if len(ok) > maxSchemaPatternBytes {
		t.Fatalf("%d bytes", len(ok))
	}
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","pattern":"` + ok + `"}}}`)}
	if e := validateArguments(tl, []byte(`{"s":"z"}`)); e != nil {
		t.Errorf("pattern of %d bytes: %+v", len(ok), e)
	}
}

// TestSchemaPatternWithinBounds: ordinary patterns and patternProperties keys, on both engines
// (a lookahead and a backreference are regexp2's), compile and validate as before; a lookahead
// pattern nesting groups exactly maxFormatRegexDepth levels deep compiles.
func TestSchemaPatternWithinBounds(t *testing.T) {
	atBound := strings.ReplaceAll(nestedGroups(maxFormatRegexDepth), `)*`, `)?`)
	if groupDepth(atBound) != maxFormatRegexDepth {
		t.Fatalf("depth %d", groupDepth(atBound))
	}
	q, _ := json.Marshal("^" + atBound + "$")
	schema := `{"type":"object","properties":{
		"name":{"type":"string","pattern":"^[a-z]+$"},
		"pw":{"type":"string","pattern":"^(?=.*\\d)[a-z\\d]{4,}$"},
		"rep":{"type":"string","pattern":"^(ab)\\1$"},
		"deep":{"type":"string","pattern":` + string(q) + `}},
		"patternProperties":{"^x-[a-z]+$":{"type":"integer"},"^(?!y-)z":{"type":"boolean"}}}`
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
	for _, c := range []struct {
		args string
		ok   bool
	}{
		{`{"name":"abc"}`, true},
		{`{"name":"Abc"}`, false},
		{`{"pw":"abc1"}`, true},
		{`{"pw":"abcd"}`, false},
		{`{"rep":"abab"}`, true},
		{`{"rep":"abba"}`, false},
		{`{"deep":"a"}`, true},
		{`{"deep":"b"}`, false},
		{`{"x-foo":1}`, true},
		{`{"x-foo":"1"}`, false},
		{`{"zed":true}`, true},
		{`{"zed":1}`, false},
	} {
		e := validateArguments(tl, []byte(c.args))
		if c.ok && e != nil {
			t.Errorf("%s: %+v", c.args, e)
		}
		if !c.ok && (e == nil || e.Code != subjects.CodeInvalidArguments) {
			t.Errorf("%s: got %+v, want invalid_arguments", c.args, e)
		}
	}
	re, err := compilePattern("^"+atBound+"$", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := re.(ecmaPattern); !ok {
		t.Errorf("engine %T, want regexp2", re)
	}
}

// The library's compile error for a pattern (when its meta-schema check did not see it first)
// names the bound too, with the pattern quoted in part.
func TestSchemaPatternCompileErrorText(t *testing.T) {
	_, err := compilePattern(nestedGroups(100), nil)
	got := compileErrorText(&jsonschema.InvalidRegexError{URL: schemaURL + "#/properties/s/pattern", Regex: nestedGroups(100), Err: err})
	if want := "at '#/properties/s/pattern': the pattern '(?=a)(a(a"; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "nests groups more than 32 levels deep, more than the executor compiles with its ECMAScript engine") || len(got) > 300 {
		t.Errorf("got %q", got)
	}
}
