package executor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// foldHeavy is a pattern only regexp2 compiles (a lookahead) that turns on the i flag and holds
// n '\S': regexp2's parser adds the case equivalents of each such set code point by code point
// (~1.1 million for \S, ".", \W, \D, most \P{…}): ~30 ms each, so a 16 KiB pattern of them
// took minutes to compile, within the length and nesting bounds.
func foldHeavy(n int) string { return "(?i)(?=a)" + strings.Repeat(`\S`, n) }

// TestSchemaPatternFoldSetsRefused: a server's pattern with more such sets under the i flag
// than maxPatternFoldSets is not compiled (invalid_schema naming the bound; its outputSchema
// is passed over); at the bound it compiles, and neither a pattern without the flag nor one
// Go compiles (its parser reads them at no such cost) is refused.
func TestSchemaPatternFoldSetsRefused(t *testing.T) {
	q, _ := json.Marshal(foldHeavy(maxPatternFoldSets + 1))
	schema := `{"type":"object","properties":{"s":{"type":"string","pattern":` + string(q) + `}}}`
	want := "with the i flag, more than the 8 the executor compiles"
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
	if e := validateArguments(tl, []byte(`{"s":"a"}`)); e == nil || e.Code != subjects.CodeInvalidSchema || !strings.Contains(e.Message, want) {
		t.Errorf("got %+v, want invalid_schema naming %q", e, want)
	}
	out := &tool{Public: "s__t", OutputSchema: json.RawMessage(schema)}
	if oc := checkOutput(out, []byte(`{"structuredContent":{"s":"a"}}`)); !oc.unusable || !strings.Contains(oc.unchecked, want) {
		t.Errorf("outputSchema: got %+v, want unusable naming %q", oc, want)
	}
	if re, err := compilePattern(foldHeavy(maxPatternFoldSets), nil); err != nil {
		t.Errorf("at the bound: %v", err)
	} else if _, ok := re.(ecmaPattern); !ok {
		t.Errorf("at the bound: engine %T, want regexp2", re)
	}
	for _, p := range []string{foldHeavy(1), "(?=a)" + strings.Repeat(`\S`, 200), "(?i)" + strings.Repeat(`\S`, 200)} {
		q, _ := json.Marshal("^" + p)
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","pattern":` + string(q) + `}}}`)}
		if e := validateArguments(tl, []byte(`{"s":"`+strings.Repeat("a", 200)+`"}`)); e != nil {
			t.Errorf("%.30s…: %+v", p, e)
		}
	}
}

// TestDefinitionPatternBudget: the distinct patterns of one definition add up to at most
// maxDefinitionPatternBytes (Go's parser on 16 KiB of Unicode classes takes ~0.5 s, and a
// 512 KiB definition holds 26 of them: ~50 s of compile before its first call was answered,
// again for every compiled copy); past it the definition is invalid_schema naming the budget.
// The same pattern written many times counts once.
func TestDefinitionPatternBudget(t *testing.T) {
	props := func(n int, distinct bool) string {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			p := "^(" + strings.Repeat("abcdefg|", (maxSchemaPatternBytes-16)/8) + "z)$"
			if distinct {
				p = "^" + strconv.Itoa(i) + p[1:]
			}
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"p` + strconv.Itoa(i) + `":{"type":"string","pattern":"` + p + `"}`)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	n := maxDefinitionPatternBytes/maxSchemaPatternBytes + 1
	want := fmt.Sprintf("the definition's patterns add up to more than the %d bytes", maxDefinitionPatternBytes)
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(props(n, true))}
	if e := validateArguments(tl, []byte(`{"p0":"0z"}`)); e == nil || e.Code != subjects.CodeInvalidSchema || !strings.Contains(e.Message, want) {
		t.Errorf("%d distinct patterns: got %+v, want invalid_schema naming %q", n, e, want)
	}
	out := &tool{Public: "s__t", OutputSchema: json.RawMessage(props(n, true))}
	if oc := checkOutput(out, []byte(`{"structuredContent":{}}`)); !oc.unusable || !strings.Contains(oc.unchecked, want) {
		t.Errorf("outputSchema: got %+v, want unusable naming %q", oc, want)
	}
	tl = &tool{Public: "s__t", InputSchema: json.RawMessage(props(3*n, false))}
	if e := validateArguments(tl, []byte(`{"p0":"z","p1":"y"}`)); e == nil || e.Code != subjects.CodeInvalidArguments {
		t.Errorf("one pattern %d times: got %+v, want invalid_arguments", 3*n, e)
	}
}

// TestFormatRegexFoldSetsCounted: a caller's string checked as "format": "regex" that turns
// on the i flag counts each such set as foldSetBytes against maxFormatRegexTotal: one of 1 KiB
// of \S (~15 s of regexp2's parse, run on past the backstop, which gave the definition up for
// every caller) is not parsed, and the arguments are refused invalid_arguments at its path.
func TestFormatRegexFoldSetsCounted(t *testing.T) {
	var parsed int
	formatRegexParsed = func(n int) { parsed += n }
	t.Cleanup(func() { formatRegexParsed = nil })
	tl := &tool{Public: "grep__search", InputSchema: json.RawMessage(formatRegexSchema)}
	args := func(v map[string]any) []byte { b, _ := json.Marshal(v); return b }
	e := validateArgumentsWithin(tl, args(map[string]any{"re": foldHeavy(maxFormatRegexTotal / foldSetBytes)}), defaultValidationLimits)
	if e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/re" || !strings.Contains(e.Message, "not checked") {
		t.Fatalf("got %+v, want invalid_arguments at /re saying it is not checked", e)
	}
	if e := validateArgumentsWithin(tl, args(map[string]any{"re": foldHeavy(2)}), defaultValidationLimits); e != nil || parsed == 0 {
		t.Fatalf("two sets: %+v (%d bytes parsed), want valid", e, parsed)
	}
}

// TestGoPatternExpansionBounded: Go's regexp expands counted repetitions ("(abcdefghij…){1000}",
// 3 KiB: 3 million instructions, 2 s and 460 MB held by every compiled copy). A pattern whose
// expansion passes maxGoPatternInsts is compiled by regexp2 (which counts its loops) and
// matches as ECMAScript says; one regexp2 does not compile either (Go's "(?P<n>…)") makes the
// definition invalid_schema naming the bound. Small counts stay Go's.
func TestGoPatternExpansionBounded(t *testing.T) {
	big := "^(" + strings.Repeat("abcdefghij", 10) + "){1000}$"
	if re, err := compilePattern(big, nil); err != nil {
		t.Fatal(err)
	} else if _, ok := re.(ecmaPattern); !ok {
		t.Errorf("engine %T, want regexp2", re)
	}
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","pattern":"` + big + `"}}}`)}
	if e := validateArguments(tl, []byte(`{"s":"`+strings.Repeat("abcdefghij", 10000)+`"}`)); e != nil {
		t.Errorf("matching value: %+v", e)
	}
	if e := validateArguments(tl, []byte(`{"s":"abcdefghij"}`)); e == nil || e.Code != subjects.CodeInvalidArguments {
		t.Errorf("value that does not match: got %+v, want invalid_arguments", e)
	}
	goOnly := "^(?P<n>" + strings.Repeat("abcdefghij", 10) + "){1000}$"
	tl = &tool{Public: "s__t", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","pattern":"` + goOnly + `"}}}`)}
	if e := validateArguments(tl, []byte(`{"s":"a"}`)); e == nil || e.Code != subjects.CodeInvalidSchema || !strings.Contains(e.Message, "instructions of Go's engine, more than the 65536") {
		t.Errorf("Go-only pattern: got %+v, want invalid_schema naming the bound", e)
	}
	for _, small := range []string{`^[a-z0-9]{1,63}(\.[a-z0-9]{1,15}){0,60}$`, `^.{0,1000}$`, `^\d{4}-\d{2}-\d{2}$`} {
		if re, err := compilePattern(small, nil); err != nil {
			t.Errorf("%s: %v", small, err)
		} else if _, ok := re.(goPattern); !ok {
			t.Errorf("%s: engine %T, want Go's", small, re)
		}
	}
}
