package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// Boolean schemas are schemas: the library compiles each one as it compiles an object (and its
// compiler's queue makes the work grow with the square of their number: 100,000 of them, 500 KiB
// of "true," within a definition's 512 KiB, took almost two minutes of a worker, again for every
// compiled copy). maxSchemaObjects counts them: past it the schema is refused invalid_schema
// before it is compiled.
func TestSchemaBooleansBounded(t *testing.T) {
	bools := func(n int) string { // the root object and n boolean schemas
		return `{"allOf":[` + strings.TrimSuffix(strings.Repeat("true,", n), ",") + `]}`
	}
	props := func(n int) string { // the root, properties and n boolean schemas
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":false`, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	want := fmt.Sprintf("more than %d", maxSchemaObjects)
	for _, schema := range []string{bools(maxSchemaObjects), props(maxSchemaObjects - 1)} {
		tl := &tool{Public: "evil__t", InputSchema: json.RawMessage(schema)}
		wantCode(t, validateWithin(t, tl, `{}`, defaultValidationLimits), subjects.CodeInvalidSchema, want)
	}
	// At the bound, and with booleans that are values rather than schemas, it still works.
	for _, schema := range []string{bools(maxSchemaObjects - 1), `{"type":"object","properties":{"on":{"type":"boolean","default":true,"enum":[true,false]}}}`} {
		tl := &tool{Public: "fine__t", InputSchema: json.RawMessage(schema)}
		if e := validateWithin(t, tl, `{}`, defaultValidationLimits); e != nil {
			t.Errorf("got %+v, want valid", e)
		}
	}
}
