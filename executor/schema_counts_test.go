package executor

import (
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A count keyword (minLength, maxItems, …) beyond 2^63-1 is what the library reads as its low 64
// bits: "minLength": 18446744073709551616 (2^64) required nothing, so every string passed a
// schema that no string can meet, and "maxLength" 2^64 refused every string. Such a schema is
// refused invalid_schema, saying where; the same numbers as data (const, enum, default) are
// data.
func TestSchemaCountsBeyondInt64(t *testing.T) {
	for _, c := range []struct{ schema, args, at string }{
		{`{"properties":{"a":{"type":"string","minLength":18446744073709551616}}}`, `{"a":"x"}`, "/properties/a/minLength"},
		{`{"properties":{"a":{"type":"string","maxLength":1e300}}}`, `{"a":"x"}`, "/properties/a/maxLength"},
		{`{"properties":{"a":{"minItems":9223372036854775808}}}`, `{"a":[]}`, "/properties/a/minItems"},
		{`{"$defs":{"d":{"maxProperties":18446744073709551617}},"$ref":"#/$defs/d"}`, `{"x":1}`, "/$defs/d/maxProperties"},
		{`{"properties":{"a":{"contains":{},"maxContains":1e20}}}`, `{"a":[1]}`, "/properties/a/maxContains"},
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		wantCode(t, validateArguments(tl, []byte(c.args)), subjects.CodeInvalidSchema, "at '"+c.at+"'")
	}
	for _, schema := range []string{
		`{"properties":{"a":{"const":{"minLength":1e300}}}}`,
		`{"properties":{"a":{"enum":[{"maxItems":18446744073709551616}],"default":{"minItems":1e30}}}}`,
		`{"properties":{"a":{"type":"string","maxLength":9223372036854775807}}}`,
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		if e := validateArguments(tl, []byte(`{}`)); e != nil {
			t.Fatalf("%s: %+v", schema, e)
		}
	}
}

// A property (or a $defs entry) may be named like a data keyword: its value is a schema all the
// same, whose counts the library reads. "properties": {"enum": {"minLength": 2^64}} was let
// through, and that property then required no length at all.
func TestSchemaCountsUnderKeywordNamedMembers(t *testing.T) {
	for _, c := range []struct{ schema, args, at string }{
		{`{"properties":{"const":{"type":"string","minLength":18446744073709551616}}}`, `{"const":"x"}`, "/properties/const/minLength"},
		{`{"properties":{"enum":{"type":"string","minLength":18446744073709551616}}}`, `{"enum":"x"}`, "/properties/enum/minLength"},
		{`{"patternProperties":{"default":{"maxItems":1e20}}}`, `{}`, "/patternProperties/default/maxItems"},
		{`{"$defs":{"examples":{"minItems":9223372036854775808}},"$ref":"#/$defs/examples"}`, `[]`, "/$defs/examples/minItems"},
		{`{"definitions":{"const":{"minProperties":1e19}}}`, `{}`, "/definitions/const/minProperties"},
		{`{"dependentSchemas":{"enum":{"maxProperties":-9223372036854775809}}}`, `{}`, "/dependentSchemas/enum/maxProperties"},
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		wantCode(t, validateArguments(tl, []byte(c.args)), subjects.CodeInvalidSchema, "at '"+c.at+"'")
	}
}
