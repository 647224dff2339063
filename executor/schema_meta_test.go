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
// meta-schema, and what pydantic v1 and other generators write without $schema), nor the
// meta-data, format and content keywords, so a malformed subschema there compiled: a
// "multipleOf": 0 reached by $ref panicked (division by zero) in every validation, answered
// internal for arguments and outcome_unknown for the result of a call that ran; a "type":
// ["string", 5] was read as "string".
func TestSchemaWholeMetaSchema(t *testing.T) {
	bad := []struct{ schema, args string }{
		{`{"$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":0}}}}}`, `{"n":1}`},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","$ref":"#/definitions/x","definitions":{"x":{"properties":{"n":{"multipleOf":0}}}}}`, `{"n":1}`},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"type":["string",5]}}}`, `{}`},
		{`{"$ref":"#/dependencies/a","dependencies":{"a":{"required":5}}}`, `{}`},
		{`{"definitions":{"x":5}}`, `{}`},
		{`{"type":"object","title":5}`, `{}`},
		{`{"properties":{"s":{"format":5}}}`, `{}`},
		{`{"properties":{"s":{"contentMediaType":{}}}}`, `{}`},
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
