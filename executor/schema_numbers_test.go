package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// The validator computes with every number it compares exactly (math/big.Rat: "type":
// "integer", minimum, multipleOf, enum, const, uniqueItems), and the cost of that grows with the
// number's exponent and digits: 1e999999, 9 bytes, takes tens of milliseconds; a number of a
// million digits, seconds. No step of the meter is taken meanwhile. In an inputSchema, 200
// "maxLength": 1e999999 held a worker compiling for 46 s (compiling is not under the
// backstop, and every compiled copy paid it again); in arguments, a caller's handful of such
// numbers against an ordinary "type": "integer" held a core for minutes and, past the
// backstop's grace, disabled the tool for everyone. Such numbers are refused before the
// library sees them: the schema invalid_schema, the arguments invalid_arguments at the number,
// the definition staying usable. (Outcomes are decided by codes; the backstop is out of reach.)
func TestSchemaHugeNumbers(t *testing.T) {
	lim := defaultValidationLimits
	lim.wall = time.Hour
	const integers = `{"type":"object","properties":{"n":{"type":"array","items":{"type":"integer","minimum":0}},"m":{"type":"integer"}}}`
	args := []struct{ name, args, path string }{
		{"exponent", `{"n":[1,1e999999]}`, "/n/1"},
		{"negative exponent", `{"m":1E-999999}`, "/m"},
		{"exponent with a sign and zeros", `{"m":2e+0000999999}`, "/m"},
		{"many digits", `{"m":` + strings.Repeat("9", 200_000) + `}`, "/m"},
		{"many fraction digits", `{"m":0.` + strings.Repeat("0", 200_000) + `1}`, "/m"},
		{"escaped name", `{"n~/":1e999999}`, "/n~0~1"},
	}
	for _, c := range args {
		t.Run("arguments "+c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(integers)}
			e := validateWithin(t, tl, c.args, lim)
			wantCode(t, e, subjects.CodeInvalidArguments, "exponent")
			if e.Path != c.path {
				t.Errorf("path %q, want %q", e.Path, c.path)
			}
			if len(e.Message) > 512 {
				t.Errorf("message of %d bytes", len(e.Message))
			}
			if why := tl.schema.unusable.Load(); why != nil {
				t.Fatalf("the definition was disabled: %s", *why)
			}
			if e := validateWithin(t, tl, `{"n":[0,12345678901234567890],"m":-3}`, lim); e != nil {
				t.Fatalf("ordinary arguments after: got %+v, want valid", e)
			}
		})
	}
	// A number inside a string is a string.
	tl := &tool{Public: "s__t", InputSchema: json.RawMessage(`{"properties":{"s":{"type":"string"}}}`)}
	if e := validateWithin(t, tl, `{"s":"1e999999 `+strings.Repeat("9", 5000)+`"}`, lim); e != nil {
		t.Fatalf("a string: got %+v, want valid", e)
	}

	var many strings.Builder
	many.WriteString(`{"properties":{`)
	for i := range 200 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `"p%d":{"maxLength":1e999999}`, i)
	}
	many.WriteString(`}}`)
	schemas := []struct{ name, schema string }{
		{"many keywords", many.String()},
		{"enum", `{"properties":{"x":{"enum":[1e999999,1e999998,1e999997]}}}`},
		{"multipleOf", `{"properties":{"x":{"multipleOf":1e-999999}}}`},
		{"digits", `{"properties":{"x":{"maximum":` + strings.Repeat("9", 200_000) + `}}}`},
	}
	for _, c := range schemas {
		t.Run("schema "+c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			e := validateWithin(t, tl, `{"x":1}`, lim)
			wantCode(t, e, subjects.CodeInvalidSchema, "exponent")
			if len(e.Message) > 1024 {
				t.Errorf("message of %d bytes", len(e.Message))
			}
		})
	}
	// Large numbers that real schemas and arguments hold still work, exactly.
	fine := []struct{ schema, good, bad string }{
		{`{"properties":{"n":{"type":"integer","maximum":12345678901234567890}}}`, `{"n":12345678901234567890}`, `{"n":12345678901234567891}`},
		{`{"properties":{"n":{"type":"number","maximum":1.7976931348623157e308,"minimum":-1e308}}}`, `{"n":4.9e-324}`, `{"n":1e309}`},
		{`{"properties":{"n":{"multipleOf":1e-300}}}`, `{"n":3e-300}`, `{"n":1e-301}`},
	}
	for _, c := range fine {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
		if e := validateWithin(t, tl, c.good, lim); e != nil {
			t.Errorf("%s with %s: got %+v, want valid", c.schema, c.good, e)
		}
		if e := validateWithin(t, tl, c.bad, lim); e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/n" {
			t.Errorf("%s with %s: got %+v, want invalid_arguments at /n", c.schema, c.bad, e)
		}
	}
}

// A structuredContent holding such a number is passed on unchecked (output validation does not
// refuse what it cannot judge), and the outputSchema stays usable.
func TestOutputSchemaHugeNumbers(t *testing.T) {
	lim := defaultValidationLimits
	lim.wall = time.Hour
	result := func(sc string) []byte { return []byte(`{"content":[],"structuredContent":` + sc + `}`) }
	tl := &tool{Public: "s__t", OutputSchema: []byte(`{"type":"object","properties":{"n":{"type":"array","items":{"type":"integer"}}}}`)}
	out := checkOutputWithin(tl, result(`{"n":[1,1e999999,2e999999]}`), lim)
	if out.fail != nil || out.unusable || !strings.Contains(out.unchecked, "exponent") {
		t.Fatalf("got %+v, want that result passed on unchecked", out)
	}
	if out := checkOutputWithin(tl, result(`{"n":[1,"x"]}`), lim); out.fail == nil || out.fail.Path != "/structuredContent/n/1" {
		t.Fatalf("a failing result after: got %+v, want protocol_error at /structuredContent/n/1", out)
	}
}
