package executor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// uniqueSchema is an ordinary schema with uniqueItems (tags, ids, vectors).
const uniqueSchema = `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`

// signedNumbers is {"a":[...]} with n distinct arrays of k numbers num or -num: the library's
// uniqueItems hashes a number by its magnitude only, so they all share one hash and it compares
// every pair (n²/2 comparisons of arrays).
func signedNumbers(n, k int, num string) string {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j := range k {
			if j > 0 {
				b.WriteByte(',')
			}
			if i>>j&1 == 1 {
				b.WriteByte('-')
			}
			b.WriteString(num)
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	return b.String()
}

// A caller alone must not make the library's uniqueItems check take quadratic time: 160 KB of
// distinct items it hashes alike took 14 s of a core (4 MB: hours), past the backstop and its
// grace, which then disabled the tool for every caller. Such arguments are refused at once,
// invalid_arguments, and the definition stays usable.
func TestUniqueItemsCollisionsRefused(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(uniqueSchema)}
	for _, args := range []string{
		signedNumbers(4096, 16, "1"),
		// strings: the library writes no length, so ["a","\u0004b"] hashes as ["a\u0004b"]
		stringSplits(4096, 13),
		// 20 items or fewer are compared pairwise, each comparison walking the common prefix
		prefixItems(20, 10_000),
	} {
		e := validateWithin(t, tl, args, defaultValidationLimits)
		wantCode(t, e, subjects.CodeInvalidArguments, "uniqueItems")
		if e.Path != "/a" {
			t.Fatalf("path %q, want /a", e.Path)
		}
	}
	if e := validateArguments(tl, []byte(`{"a":[[1,-1],[-1,1]]}`)); e != nil {
		t.Fatalf("the definition is no longer usable: %+v", e)
	}
	wantCode(t, validateArguments(tl, []byte(`{"a":[[1,-1],[1.0,-10e-1]]}`)), subjects.CodeInvalidArguments, "are equal")
}

// Legitimate arrays pass: many distinct values, vectors whose signs differ (a few to a hash),
// and schemas without uniqueItems take any arrays.
func TestUniqueItemsLegitimate(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(uniqueSchema)}
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range 20_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `[%d,-%d,%d]`, i, i+1, i)
		fmt.Fprintf(&b, `,[-%d,%d,%d]`, i, i+1, i)
	}
	b.WriteString(`]}`)
	if e := validateWithin(t, tl, b.String(), defaultValidationLimits); e != nil {
		t.Fatalf("vectors: %+v", e)
	}
	plain := &tool{Public: "s__p", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"array"}}}`)}
	if e := validateWithin(t, plain, signedNumbers(4096, 16, "1"), defaultValidationLimits); e != nil {
		t.Fatalf("no uniqueItems: %+v", e)
	}
}

// stringSplits is {"a":[...]} with n distinct arrays of strings that spell, with the byte 4
// the library writes before each string, one same byte sequence.
func stringSplits(n, k int) string {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`["x`)
		for j := range k {
			if i>>j&1 == 1 {
				b.WriteString(`","x`)
			} else {
				b.WriteString(`\u0004x`)
			}
		}
		b.WriteString(`"]`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// prefixItems is {"a":[...]} with n arrays of m numbers, the same but for the last.
func prefixItems(n, m int) string {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		b.WriteString(strings.Repeat("7,", m))
		fmt.Fprintf(&b, "%d]", i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// A result may echo what a caller sent: its costly uniqueItems check passes that result on
// unchecked, at once, rather than overrunning until the outputSchema is unusable for every
// later result.
func TestUniqueItemsCollisionsInResult(t *testing.T) {
	tl := &tool{Public: "s__t", OutputSchema: []byte(uniqueSchema)}
	result := func(sc string) []byte { return []byte(`{"content":[],"structuredContent":` + sc + `}`) }
	out := checkOutput(tl, result(signedNumbers(4096, 16, "1")))
	if out.fail != nil || out.unusable || !strings.Contains(out.unchecked, "uniqueItems") {
		t.Fatalf("got %+v, want that result passed on unchecked", out)
	}
	if out := checkOutput(tl, result(`{"a":[1,1.0]}`)); out.fail == nil || out.fail.Path != "/structuredContent/a" {
		t.Fatalf("a failing result after: got %+v, want protocol_error at /structuredContent/a", out)
	}
}

// "uniqueItems": false asserts nothing (schema generators write it by default): arrays under
// such a schema alone are not costed. 4,096 distinct vectors of ±1, which a schema with
// "uniqueItems": true refuses, were refused under false.
func TestUniqueItemsFalseNotCosted(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"array","uniqueItems":false},"b":{"uniqueItems":false}}}`)}
	if e := validateWithin(t, tl, signedNumbers(4096, 16, "1"), defaultValidationLimits); e != nil {
		t.Fatalf("uniqueItems false: %+v", e)
	}
}

// Only arrays the library checks for uniqueItems are costed: 1,024 distinct sign-quantized
// embeddings (64 numbers of ±0.125, all hashed alike by the library) beside an array of tags
// that are unique were refused for the tags' uniqueItems. The same embeddings under
// uniqueItems, or checked there through a $ref, an allOf, items, are refused at their path.
func TestUniqueItemsOnlyCheckedArraysCosted(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"tags":["x","y"],"embeddings":[`)
	for i := range 1024 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j := range 64 {
			if j > 0 {
				b.WriteByte(',')
			}
			if (i*2654435761>>(j%29)+j*i)&1 == 1 { // (distinct, of varied signs)
				b.WriteByte('-')
			}
			b.WriteString("0.125")
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	args := b.String()
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object","properties":{"tags":{"type":"array","uniqueItems":true},"embeddings":{"type":"array","items":{"type":"array","items":{"type":"number"}}}}}`)}
	if e := validateWithin(t, tl, args, defaultValidationLimits); e != nil {
		t.Fatalf("embeddings beside unique tags: %+v", e)
	}
	for _, schema := range []string{
		`{"properties":{"embeddings":{"uniqueItems":true}}}`,
		`{"$defs":{"u":{"uniqueItems":true}},"properties":{"embeddings":{"$ref":"#/$defs/u"}}}`,
		`{"properties":{"embeddings":{"allOf":[{"type":"array"},{"uniqueItems":true}]}}}`,
		`{"additionalProperties":{"items":{"type":"number"},"uniqueItems":true}}`,
		// (a $dynamicRef: every array costed beforehand)
		`{"$defs":{"u":{"$dynamicAnchor":"u","uniqueItems":true}},"properties":{"embeddings":{"$dynamicRef":"#u"}}}`,
	} {
		tl := &tool{Public: "s__u", InputSchema: []byte(schema)}
		e := validateWithin(t, tl, args, defaultValidationLimits)
		wantCode(t, e, subjects.CodeInvalidArguments, "uniqueItems")
		if e.Path != "/embeddings" {
			t.Fatalf("%s: path %q, want /embeddings", schema, e.Path)
		}
	}
}
