package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSchemaWholeMetaSchema: a 2019-09 or 2020-12 schema (the default without $schema) is
// checked against its draft's whole meta-schema, as the library checks it without the
// executor's meter vocabulary. Registering that vocabulary (with AssertVocabs) made the
// library check such a schema against its core, applicator, unevaluated and validation
// vocabularies only: nothing under "definitions" or "dependencies" (still in the 2020-12
// meta-schema, and what pydantic v1 and other generators write without $schema), so a
// malformed subschema there compiled: a "multipleOf": 0 reached by $ref panicked (division by
// zero) in every validation, answered internal for arguments and outcome_unknown for the
// result of a call that ran; a "type": ["string", 5] was read as "string". (Annotation
// keywords of the wrong type are let through: TestSchemaAnnotationsNotChecked.)
func TestSchemaWholeMetaSchema(t *testing.T) {
	bad := []struct{ schema, args string }{
		{`{"$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":0}}}}}`, `{"n":1}`},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":0}}}}}`, `{"n":1}`},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"type":["string",5]}}}`, `{}`},
		{`{"$ref":"#/dependencies/a","dependencies":{"a":{"required":5}}}`, `{}`},
		{`{"definitions":{"x":5}}`, `{}`},
	}
	for _, c := range bad {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("schema %s: validating %s panicked: %.200v", c.schema, c.args, p)
				}
			}()
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			got := validateArguments(tl, []byte(c.args))
			if got == nil || got.Code != subjects.CodeInvalidSchema || !strings.Contains(got.Message, "not a valid JSON Schema") {
				t.Errorf("schema %s, arguments %s: got %+v, want invalid_schema, not a valid JSON Schema", c.schema, c.args, got)
			}
		}()
	}

	// The result of a call that ran is passed on unchecked, with why (nothing panics).
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("checking a result panicked: %.200v", p)
			}
		}()
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(bad[0].schema)}
		got := checkOutput(tl, []byte(`{"content":[],"structuredContent":{"n":1}}`))
		if got.fail != nil || !got.unusable || !strings.Contains(got.unchecked, "not a valid JSON Schema") {
			t.Errorf("got %+v, want the result unchecked: the outputSchema cannot be used", got)
		}
	}()

	// Well-formed schemas of the same shapes still validate.
	good := []struct {
		schema, args string
		ok           bool
	}{
		{`{"$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":2}}}}}`, `{"n":4}`, true},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":2}}}}}`, `{"n":3}`, false},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"type":["object","null"]}}}`, `{}`, true},
		{`{"type":"object","title":"t","description":"d","default":{},"examples":[{}],"deprecated":false,"properties":{"s":{"format":"email","contentMediaType":"text/plain"}}}`, `{"s":"x"}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"x":{"type":"string"}},"properties":{"s":{"$ref":"#/definitions/x"}}}`, `{"s":1}`, false},
		{`{"properties":{"k":{"type":"string"}},"patternProperties":{"^(?=x)":{"type":"string"}}}`, `{"xy":"s"}`, true},
	}
	for _, c := range good {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		got := validateArguments(tl, []byte(c.args))
		if c.ok && got != nil || !c.ok && (got == nil || got.Code != subjects.CodeInvalidArguments) {
			t.Errorf("schema %s, arguments %s: got %+v, want ok %v", c.schema, c.args, got, c.ok)
		}
	}
}

// TestSchemaAnnotationsNotChecked: the whole-meta-schema check (checkMetaSchema) does not
// refuse a schema whose only faults are the types of annotation keywords of the meta-data,
// format and content vocabularies ("description": null, "examples" as an object, "deprecated":
// "true", "format": null): the library reads them only if they have the right type, the
// executor asserts neither formats nor content, and the TypeScript SDK (ajv with
// validateSchema: false) accepts such schemas. Before, each made every call of a tool
// invalid_schema (its result unchecked), though 2019-09 and 2020-12 schemas, the default
// without $schema, had compiled with them.
func TestSchemaAnnotationsNotChecked(t *testing.T) {
	cases := []struct {
		schema, args string
		ok           bool
	}{
		{`{"type":"object","properties":{"q":{"type":"string","description":null}},"required":["q"]}`, `{"q":"x"}`, true},
		{`{"type":"object","properties":{"q":{"type":"string","description":null}},"required":["q"]}`, `{"q":1}`, false},
		{`{"type":"object","properties":{"q":{"type":"string","title":null,"examples":{"a":"x"}}}}`, `{"q":"x"}`, true},
		{`{"type":"object","properties":{"q":{"type":"string","deprecated":"true","readOnly":1,"writeOnly":"no"}}}`, `{"q":"x"}`, true},
		{`{"type":"object","properties":{"q":{"type":"string","format":null,"contentMediaType":{},"contentEncoding":5}}}`, `{"q":"x"}`, true},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","properties":{"q":{"type":"integer","description":null,"examples":"1"}}}`, `{"q":"x"}`, false},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"type":"object","title":5,"properties":{"q":{"type":"string"}}}}}`, `{"q":"x"}`, true},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","properties":{"q":{"items":{"type":"integer","description":null}}}}`, `{"q":["x"]}`, false},
		{`{"dependencies":{"q":{"required":["r"],"title":null}}}`, `{"q":1}`, false},
		{`{"dependencies":{"q":{"required":["r"],"title":null}}}`, `{"q":1,"r":2}`, true},
	}
	for _, c := range cases {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		got := validateArguments(tl, []byte(c.args))
		if c.ok && got != nil || !c.ok && (got == nil || got.Code != subjects.CodeInvalidArguments) {
			t.Errorf("schema %s, arguments %s: got %+v, want ok %v", c.schema, c.args, got, c.ok)
		}
	}
	// A result is checked against such an outputSchema, not passed on unchecked.
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(cases[0].schema)}
	if got := checkOutput(tl, []byte(`{"content":[],"structuredContent":{"q":1}}`)); got.fail == nil || got.unusable {
		t.Errorf("result against %s: got %+v, want it refused as not matching", cases[0].schema, got)
	}

	// Faults beside them, and faults in keywords that change validation, are still refused.
	for _, schema := range []string{
		`{"properties":{"q":{"description":null,"multipleOf":0}}}`,
		`{"definitions":{"x":{"description":null,"type":["string",5]}}}`,
		`{"properties":{"description":5}}`,
		`{"properties":{"q":{"contentSchema":{"type":5}}}}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","properties":{"q":{"items":{"description":null,"type":5}}}}`,
		`{"dependencies":{"q":{"title":null,"required":5}}}`,
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		if got := validateArguments(tl, []byte(`{}`)); got == nil || got.Code != subjects.CodeInvalidSchema {
			t.Errorf("schema %s: got %+v, want invalid_schema", schema, got)
		}
	}
}
