package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A string not checked as "format": "regex" (over the bounds of checkFormatRegex) does not
// count as a failure a schema could turn into a pass: under "not", the "if" of an if/then, or
// a oneOf branch it would have matched, a failure lets through what the schema refuses. The
// arguments holding one are refused invalid_arguments, saying why, whatever the rest of the
// schema says; a result holding one is passed on unchecked (not judged valid).
func TestFormatRegexUncheckedNotBypassed(t *testing.T) {
	long := strings.Repeat("a", 2*maxFormatRegexBytes) // a valid regular expression, too long to check
	medium := strings.Repeat("a", maxFormatRegexBytes-8)
	many := make([]any, maxFormatRegexTotal/len(medium)+2)
	for i := range many {
		many[i] = medium[:len(medium)-3] + fmt.Sprintf("%03d", i)
	}
	cases := []struct {
		name, schema string
		args         map[string]any
		path         string // where the refusal points
	}{
		{"not", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"name":{"type":"string","not":{"format":"regex"}}}}`, map[string]any{"name": long}, "/name"},
		{"if-then", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"q":{"type":"string","if":{"format":"regex"},"then":{"maxLength":10}}}}`, map[string]any{"q": long}, "/q"},
		{"oneOf", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"q":{"oneOf":[{"format":"regex"},{"type":"string"}]}}}`, map[string]any{"q": long}, "/q"},
		{"not-total", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"names":{"type":"array","items":{"type":"string","not":{"format":"regex"}}}}}`, map[string]any{"names": many}, "/names/8"},
		{"propertyNames", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"propertyNames":{"not":{"format":"regex"}}}`, map[string]any{long: 1}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(tc.schema)}
			b, _ := json.Marshal(tc.args)
			e := validateArgumentsWithin(tl, b, defaultValidationLimits)
			if e == nil || e.Code != subjects.CodeInvalidArguments || !strings.Contains(e.Message, "regex") || e.Path != tc.path {
				t.Fatalf("arguments with a string not checked as a regex: %+v, want invalid_arguments at %q saying it was not checked", e, tc.path)
			}
			// A short string is still judged: a valid regex is refused, one that is none passes.
			short := strings.Replace(string(b), strings.Repeat("a", len(medium)), "a+", -1)
			if e := validateArgumentsWithin(tl, []byte(short), defaultValidationLimits); e == nil || e.Code != subjects.CodeInvalidArguments {
				t.Fatalf("short regex: %+v, want invalid_arguments", e)
			}

			tl = &tool{Public: "s__t", OutputSchema: json.RawMessage(tc.schema)}
			sc, _ := json.Marshal(map[string]any{"structuredContent": tc.args})
			out := checkOutputWithin(tl, sc, defaultValidationLimits)
			if out.fail != nil || !strings.Contains(out.unchecked, "regex") {
				t.Fatalf("result with a string not checked as a regex: fail %+v, unchecked %q; want it passed on unchecked, saying why", out.fail, out.unchecked)
			}
		})
	}
}

// After a copy is compiled the regexp engine only checks "format": "regex" strings (it returns
// no matcher): the schema's own patterns (pattern, patternProperties, propertyNames, through
// $ref and $dynamicRef, in contentSchema) keep refusing what they do not match, over many
// validations, on concurrent copies, and after the definition is listed again.
func TestPatternsStillMatchAfterCompile(t *testing.T) {
	const schema = `{"type":"object",
	  "$defs":{"word":{"$dynamicAnchor":"w","type":"string","pattern":"^[a-z]+$"}},
	  "properties":{
	    "a":{"pattern":"^x+$"},
	    "b":{"patternProperties":{"^n_":{"type":"integer"}}},
	    "c":{"propertyNames":{"pattern":"^k[0-9]$"}},
	    "d":{"$dynamicRef":"#w"},
	    "e":{"$ref":"#/$defs/word"},
	    "f":{"type":"string","contentMediaType":"application/json","contentSchema":{"type":"object","properties":{"z":{"pattern":"^z$"}}}},
	    "g":{"type":"string","pattern":"(?=y)y+"}
	  }}`
	good := `{"a":"xx","b":{"n_1":1},"c":{"k1":0},"d":"abc","e":"abc","f":"{\"z\":\"z\"}","g":"yy"}`
	bad := map[string]string{
		"/a":     `{"a":"xy"}`,
		"/b/n_1": `{"b":{"n_1":"s"}}`,
		"/c":     `{"c":{"kk":0}}`,
		"/d":     `{"d":"ABC"}`,
		"/e":     `{"e":"ABC"}`,
		"/g":     `{"g":"zz"}`,
	}
	for round := range 2 {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)} // listed again: a new definition
		var wg sync.WaitGroup
		errs := make(chan string, 1000)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					if e := validateArgumentsWithin(tl, []byte(good), defaultValidationLimits); e != nil {
						errs <- fmt.Sprintf("round %d worker %d #%d: good arguments refused: %+v", round, w, i, e)
						return
					}
					for path, args := range bad {
						e := validateArgumentsWithin(tl, []byte(args), defaultValidationLimits)
						if e == nil || e.Code != subjects.CodeInvalidArguments || !strings.HasPrefix(e.Path, path) {
							errs <- fmt.Sprintf("round %d worker %d #%d: %s: %+v, want invalid_arguments at %s", round, w, i, args, e, path)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

// groupDepth cannot be misled into seeing shallow groups where the ECMAScript parser (whose
// cost grows with the cube of their nesting) reads deep ones: a "[" in a comment, (?#[), or
// in an extended-mode comment, (?x)#[, is not a class. Each such string of 1 KiB took ~0.25 s
// of parsing, eight in one validation 2 s, where the bounds allow ~25 ms a string.
func TestFormatRegexDepthNotHidden(t *testing.T) {
	var parsed int
	formatRegexParsed = func(n int) { parsed += n }
	t.Cleanup(func() { formatRegexParsed = nil })
	tl := &tool{Public: "grep__search", InputSchema: json.RawMessage(formatRegexSchema)}
	nest := func(n int) string { return "(?=a)" + strings.Repeat("(", n) + "a" + strings.Repeat(")*", n) }
	for _, s := range []string{
		"(?#[)" + nest(300),
		"(?#a[b)" + nest(300),
		"(?x)#[\n" + nest(300),
		"(?ix:#[\n" + nest(300) + ")",
		"(?x)[\n" + nest(300), // (a class in extended mode: refused all the same)
	} {
		parsed = 0
		b, _ := json.Marshal(map[string]any{"re": s})
		e := validateArgumentsWithin(tl, b, defaultValidationLimits)
		if e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/re" || !strings.Contains(e.Message, "nest") {
			t.Errorf("%.20q…: %+v, want invalid_arguments at /re saying its groups nest too deeply", s, e)
		}
		if parsed != 0 {
			t.Errorf("%.20q…: %d bytes parsed, want none", s, parsed)
		}
	}
	// Comments and extended mode within the bound are still checked.
	for _, s := range []string{"(?#[)(?=a)a+", "(?x) a # [(\n b", "(?#(((((((((((((((((((((((((((((((((((()(?=a)b"} {
		b, _ := json.Marshal(map[string]any{"re": s})
		if e := validateArgumentsWithin(tl, b, defaultValidationLimits); e != nil {
			t.Errorf("%q: %+v, want valid", s, e)
		}
	}
}
