package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server's inputSchema is bounded before it is compiled: deeper than maxSchemaDepth levels or
// with more than maxSchemaObjects objects it is refused invalid_schema (compiling it would cost
// the executor CPU and memory without bound), and just within the bounds it works.
func TestSchemaCompileBounded(t *testing.T) {
	deep := func(levels int) string { // the schema object is level 1
		return strings.Repeat(`{"items":`, levels-1) + `{}` + strings.Repeat(`}`, levels-1)
	}
	wide := func(objects int) string { // the root and properties objects are 2 of them
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range objects - 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":{}`, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	cases := []struct {
		name, schema, args, want string
	}{
		{"deep", deep(maxSchemaDepth + 1), `{}`, fmt.Sprintf("more than %d levels", maxSchemaDepth)},
		{"deep in arrays", `{"allOf":[` + deep(maxSchemaDepth) + `]}`, `{}`, fmt.Sprintf("more than %d levels", maxSchemaDepth)},
		{"many objects", wide(maxSchemaObjects + 1), `{}`, fmt.Sprintf("more than %d objects", maxSchemaObjects)},
		{"at the limits: deep", deep(maxSchemaDepth), `{}`, ""},
		{"at the limits: wide", wide(maxSchemaObjects), `{"p1":1}`, ""},
		{"braces in strings do not count", `{"description":"` + strings.Repeat(`{[`, 5000) + `","type":"object"}`, `{}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "evil__t", InputSchema: json.RawMessage(c.schema)}
			e := validateWithin(t, tl, c.args, defaultValidationLimits)
			if c.want == "" {
				if e != nil {
					t.Fatalf("got %+v, want valid", e)
				}
				return
			}
			wantCode(t, e, subjects.CodeInvalidSchema, c.want)
			wantCode(t, validateWithin(t, tl, c.args, defaultValidationLimits), subjects.CodeInvalidSchema, c.want)
		})
	}
}

// MCP's inputSchema patterns are ECMA-262 regular expressions: lookarounds, backreferences and
// \u escapes, which Go's regexp refuses, still validate (the tool used to be uncallable).
func TestSchemaECMAPatterns(t *testing.T) {
	cases := []struct {
		name, schema, good, bad, path string
	}{
		{"negative lookahead", `{"properties":{"slug":{"type":"string","pattern":"^(?!admin$)[a-z]+$"}}}`,
			`{"slug":"alice"}`, `{"slug":"admin"}`, "/slug"},
		{"lookbehind", `{"properties":{"amount":{"type":"string","pattern":"(?<=^EUR )[0-9]+$"}}}`,
			`{"amount":"EUR 12"}`, `{"amount":"USD 12"}`, "/amount"},
		{"backreference", `{"properties":{"pair":{"type":"string","pattern":"^(\\w)\\1$"}}}`,
			`{"pair":"zz"}`, `{"pair":"zy"}`, "/pair"},
		{"\\u escape", `{"properties":{"letter":{"type":"string","pattern":"^\\u0041+$"}}}`,
			`{"letter":"AAA"}`, `{"letter":"aaa"}`, "/letter"},
		{"patternProperties", `{"patternProperties":{"^(?!x-)":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			`{"count":1,"x-note":"free text"}`, `{"count":"one"}`, "/count"},
		{"Go syntax still works", `{"properties":{"id":{"type":"string","pattern":"^[a-f0-9]{8}$"}}}`,
			`{"id":"deadbeef"}`, `{"id":"DEADBEEF"}`, "/id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			if e := validateArguments(tl, []byte(c.good)); e != nil {
				t.Fatalf("%s: got %+v, want valid", c.good, e)
			}
			e := validateArguments(tl, []byte(c.bad))
			if e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != c.path {
				t.Fatalf("%s: got %+v, want invalid_arguments at %s", c.bad, e, c.path)
			}
		})
	}
}

// A pattern only the ECMAScript engine compiles may backtrack catastrophically (it has no
// linear-time guarantee): the match is cut off, the call refused with a message naming the
// pattern, and the definition stays usable for values that match quickly. (The outcome is
// decided by codes; the wall-clock backstop is set out of reach.)
func TestSchemaECMAPatternCatastrophic(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"properties":{"s":{"type":"string","pattern":"^(?=a)(a+)+$"}}}`)}
	lim := defaultValidationLimits
	lim.wall = time.Hour
	e := validateWithin(t, tl, `{"s":"`+strings.Repeat("a", 40)+`!"}`, lim)
	wantCode(t, e, subjects.CodeInvalidArguments, "^(?=a)(a+)+$")
	if why := tl.schema.unusable.Load(); why != nil {
		t.Fatalf("the definition was disabled: %s", *why)
	}
	if e := validateWithin(t, tl, `{"s":"aaaa"}`, lim); e != nil {
		t.Fatalf("a quick value after: got %+v, want valid", e)
	}
	if e := validateWithin(t, tl, `{"s":"b"}`, lim); e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/s" {
		t.Fatalf("a quick failing value after: got %+v, want invalid_arguments at /s", e)
	}
}

// invalid_arguments messages list their failures in one order, whatever order the validator
// found them in (it walks Go maps), and failures under a $ref are named at the argument that
// failed (they used to be dropped from the message).
func TestSchemaMessagesSortedThroughRef(t *testing.T) {
	schema := `{"$defs":{"short":{"type":"string","maxLength":2}},"type":"object",
		"properties":{"a":{"$ref":"#/$defs/short"},"b":{"$ref":"#/$defs/short"},"c":{"type":"integer"},"d":{"type":"integer"}},
		"additionalProperties":false,"required":["zz","yy"]}`
	args := `{"d":"t","c":"s","b":"yyyy","a":"xxxx","q":1,"p":2}`
	const want = "missing properties 'zz', 'yy'; additional properties 'p', 'q' not allowed; " +
		"at '/a': maxLength: got 4, want 2; at '/b': maxLength: got 4, want 2; at '/c': got string, want integer (and 1 more)"
	for i := range 30 {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		e := validateArguments(tl, []byte(args))
		if e == nil || e.Code != subjects.CodeInvalidArguments || e.Message != want || e.Path != "/zz" {
			t.Fatalf("run %d: got %+v, want path /zz and message %q", i, e, want)
		}
	}
	// Branches of a oneOf: the oneOf first, then its branches' failures, in one order.
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(shapeSchema)}
	const want3 = "at '/shape': 'oneOf' failed, none matched; at '/shape': missing property 'points'; " +
		"at '/shape/center': missing property 'y'; at '/shape/kind': value must be 'polygon'"
	for i := range 30 {
		e := validateArguments(tl, []byte(`{"shape":{"kind":"circle","center":{"x":1},"r":3}}`))
		if e == nil || e.Message != want3 || e.Path != "/shape" {
			t.Fatalf("run %d: got %+v, want path /shape and message %q", i, e, want3)
		}
	}
	// Only $ref failures: named where they are.
	tl = &tool{Public: "s__t", InputSchema: json.RawMessage(`{"$defs":{"port":{"type":"integer","maximum":65535}},"properties":{"ports":{"type":"array","items":{"$ref":"#/$defs/port"}}}}`)}
	e := validateArguments(tl, []byte(`{"ports":[80,70000,"x"]}`))
	const want2 = "at '/ports/1': must be <= 65535; at '/ports/2': got string, want integer"
	if e == nil || e.Message != want2 || e.Path != "/ports/1" {
		t.Fatalf("got %+v, want path /ports/1 and message %q", e, want2)
	}
}

// A $ref cycle that makes no progress into the arguments (a schema that is, through $refs and
// in-place applicators, part of itself) makes the schema unusable: invalid_schema, not a
// validation that loops, panics, or passes or fails by chance.
func TestSchemaRefCycle(t *testing.T) {
	cycles := []struct{ name, schema, where string }{
		{"itself", `{"$ref":"#"}`, "'#'"},
		{"two $defs", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "#/$defs/"},
		{"under not", `{"type":"object","not":{"$ref":"#"}}`, "'#'"},
		{"through anyOf", `{"$defs":{"a":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, "#/$defs/a"},
		{"through allOf and if", `{"allOf":[{"if":{"$ref":"#"}}]}`, "'#'"},
		// $dynamicRef's static target (#/$defs/inner/$defs/t) makes no cycle; the target it
		// resolves to while validating (the root) does: found by the validator, refused alike.
		{"through $dynamicRef", `{"$id":"https://x.invalid/root","$dynamicAnchor":"n","allOf":[{"$ref":"inner"}],
			"$defs":{"inner":{"$id":"https://x.invalid/inner","$defs":{"t":{"$dynamicAnchor":"n","type":"object"}},"anyOf":[{"$dynamicRef":"#n"}]}}}`, "cycle"},
	}
	for _, c := range cycles {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			for _, args := range []string{`{}`, `{"x":1}`} {
				e := validateWithin(t, tl, args, defaultValidationLimits)
				wantCode(t, e, subjects.CodeInvalidSchema, "cycle")
				if !strings.Contains(e.Message, c.where) {
					t.Errorf("%q does not say where (%s)", e.Message, c.where)
				}
			}
		})
	}
	// Recursion that descends into the arguments is no cycle.
	fine := []struct{ schema, good, bad string }{
		{`{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
			`{"kids":[{"kids":[]},{}]}`, `{"kids":[{"kids":[1]}]}`},
		{`{"properties":{"next":{"$ref":"#"}},"additionalProperties":false}`, `{"next":{"next":{}}}`, `{"next":{"other":1}}`},
		{`{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, `{"type":"string"}`, `{"type":12}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"http://json-schema.org/draft-07/schema#"}`, `{"minLength":1}`, `{"minLength":"x"}`},
	}
	for _, c := range fine {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		if e := validateWithin(t, tl, c.good, defaultValidationLimits); e != nil {
			t.Errorf("%s with %s: got %+v, want valid", c.schema, c.good, e)
		}
		if e := validateWithin(t, tl, c.bad, defaultValidationLimits); e == nil || e.Code != subjects.CodeInvalidArguments {
			t.Errorf("%s with %s: got %+v, want invalid_arguments", c.schema, c.bad, e)
		}
	}
}

// An inputSchema that does not compile is refused with what is wrong and where: the keyword's
// JSON pointer in the schema, not the library's "is not valid against metaschema" alone; and
// the message stays bounded whatever the schema holds.
func TestSchemaCompileErrorsSayWhere(t *testing.T) {
	cases := []struct{ name, schema string }{
		{"wrong type of keyword", `{"type":"object","properties":{"x":{"type":12}}}`},
		{"bad minLength", `{"properties":{"name":{"minLength":"a"}}}`},
		{"missing $ref target", `{"properties":{"x":{"$ref":"#/$defs/nope"}}}`},
		{"pattern no engine compiles", `{"properties":{"code":{"type":"string","pattern":"(unclosed"}}}`},
	}
	wants := [][]string{
		{"/properties/x/type"},
		{"/properties/name/minLength"},
		{"#/$defs/nope"},
		{"(unclosed", "/properties/code"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			e := validateArguments(tl, []byte(`{}`))
			wantCode(t, e, subjects.CodeInvalidSchema, "")
			for _, w := range wants[i] {
				if !strings.Contains(e.Message, w) {
					t.Errorf("%q does not say %q", e.Message, w)
				}
			}
			if strings.Contains(e.Message, schemaURL) || strings.Contains(e.Message, "\n") {
				t.Errorf("%q: want one line, with pointers relative to the schema", e.Message)
			}
		})
	}
	// A huge property name in the failing location: the message stays bounded.
	huge := strings.Repeat("k", 200<<10)
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"properties":{"` + huge + `":{"type":12},"b":{"type":13},"c":{"enum":5}}}`)}
	e := validateArguments(tl, []byte(`{}`))
	wantCode(t, e, subjects.CodeInvalidSchema, "/properties/")
	if len(e.Message) > 1024 {
		t.Errorf("message of %d bytes", len(e.Message))
	}
}
