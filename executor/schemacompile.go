package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// What compileSchema checks besides what the library does: the size of the schema before it
// is compiled (schemaShape), $ref cycles after (refCycle), and what its errors say
// (compileErrorText).

// schemaShape checks the JSON text raw against maxSchemaDepth and maxSchemaObjects, and its
// numbers against maxNumberBytes and maxNumberExponent (see numbers.go), from its bytes and
// before anything decodes it: the library compiles every schema object it holds
// (and validates the whole document against its meta-schema), recursively, so the bounds
// bound the work of compiling and the memory of the compiled copies. Text that is not JSON is
// refused when decoded.
func schemaShape(raw []byte) error {
	switch jsonShape(raw, maxSchemaDepth, maxSchemaObjects) {
	case tooDeep:
		return fmt.Errorf("it nests more than %d levels deep", maxSchemaDepth)
	case tooManyObjects:
		return fmt.Errorf("it holds more than %d objects and booleans (each may be a schema)", maxSchemaObjects)
	}
	if n, huge := firstHugeNumber(raw); huge {
		return fmt.Errorf("it holds the number %s, of %s", truncateString(n, 40), hugeNumberText)
	}
	return nil
}

// countKeywords are the keywords whose value the library reads as an int, from the low 64 bits
// of the number ("minLength": 2^64 read as 0: it required nothing, where no string meets it).
var countKeywords = map[string]bool{
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "minContains": true, "maxContains": true,
}

// dataKeywords hold values, not schemas: a member named like a keyword inside them is data.
var dataKeywords = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}

// nameKeywords hold members named by the schema's author, each a schema: a member named like a
// data keyword there ("properties": {"enum": {...}}) is a schema all the same.
var nameKeywords = map[string]bool{
	"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true,
}

// hugeCount finds, in the decoded schema doc, a count keyword (countKeywords) whose value is an
// integer beyond 2^63-1, and returns its location (JSON pointer tokens) and value. A member of
// such a name that is no keyword, outside the data keywords, holds a schema, so a number there
// is refused all the same (by the meta-schema, else).
func hugeCount(doc any) ([]string, string, bool) { return hugeCountIn(doc, false) }

// hugeCountIn is hugeCount of doc, whose members are names (nameKeywords) if names.
func hugeCountIn(doc any, names bool) ([]string, string, bool) {
	switch v := doc.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // (the first in a fixed order)
		for _, k := range keys {
			if n, ok := v[k].(json.Number); ok && countKeywords[k] {
				if r, ok := new(big.Rat).SetString(string(n)); ok && r.IsInt() && !r.Num().IsInt64() {
					return []string{k}, string(n), true
				}
			}
			if dataKeywords[k] && !names {
				continue
			}
			if at, n, ok := hugeCountIn(v[k], nameKeywords[k] && !names); ok {
				return append([]string{k}, at...), n, true
			}
		}
	case []any:
		for i, e := range v {
			if at, n, ok := hugeCount(e); ok {
				return append([]string{strconv.Itoa(i)}, at...), n, true
			}
		}
	}
	return nil, "", false
}

// shape is what jsonShape finds.
type shape int

const (
	shapeOK shape = iota
	tooDeep
	tooManyObjects
)

// jsonShape scans the JSON text raw, from its bytes and without decoding it, for nesting of
// arrays and objects deeper than maxDepth levels or more than maxObjects objects and booleans
// (0: any number), and stops at the first it finds. Booleans count because true and false are
// schemas too, each compiled as an object is (the library's compile time grows with the square
// of the schemas it holds: 100,000 "true" in a 512 KiB definition took minutes); a boolean
// that is only a value (a default, an enum) counts as well, which no real schema has 10,000
// of. Text that is not JSON gets some answer: it is refused when decoded.
func jsonShape(raw []byte, maxDepth, maxObjects int) shape {
	depth, objects, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case 't', 'f': // true, false (outside a string, no other JSON token starts so)
			if objects++; maxObjects > 0 && objects > maxObjects {
				return tooManyObjects
			}
		case '{':
			if objects++; maxObjects > 0 && objects > maxObjects {
				return tooManyObjects
			}
			fallthrough
		case '[':
			if depth++; depth > maxDepth {
				return tooDeep
			}
		case '}', ']':
			depth--
		}
	}
	return shapeOK
}

// refCycle finds a schema object of the compiled schema root that is part of itself: reached
// again, through $ref (or $recursiveRef, $dynamicRef) and the applicators that apply to the
// same value (allOf, anyOf, oneOf, not, if/then/else, dependentSchemas), without descending
// into the arguments. Validating against it never ends (the library stops such a loop when it
// meets it, with an error that decides nothing where only a yes/no is asked, as under "not"):
// the schema is refused instead. It returns the location of a schema object on the cycle.
// Recursion through properties, items and the like descends, and is no cycle.
func refCycle(root *jsonschema.Schema) (string, bool) {
	// Every schema object reachable by any edge, each once.
	all := []*jsonschema.Schema{root}
	seen := map[*jsonschema.Schema]bool{root: true}
	for i := 0; i < len(all); i++ {
		same, deeper := schemaEdges(all[i])
		for _, n := range append(same, deeper...) {
			if !seen[n] {
				seen[n] = true
				all = append(all, n)
			}
		}
	}
	// A depth-first walk of the same-value edges alone: a cycle is an edge back to a schema
	// on the current chain.
	const (
		unseen = iota
		onChain
		done
	)
	state := make(map[*jsonschema.Schema]int, len(all))
	var found *jsonschema.Schema
	var walk func(s *jsonschema.Schema) bool
	walk = func(s *jsonschema.Schema) bool {
		state[s] = onChain
		same, _ := schemaEdges(s)
		for _, n := range same {
			switch state[n] {
			case onChain:
				found = n
				return true
			case unseen:
				if walk(n) {
					return true
				}
			}
		}
		state[s] = done
		return false
	}
	for _, s := range all {
		if state[s] == unseen && walk(s) {
			return relativeLocations(found.Location), true
		}
	}
	return "", false
}

// schemaEdges are the subschemas of s: those applied to the value s applies to (same) and those
// applied to a value inside it or derived from it (deeper).
func schemaEdges(s *jsonschema.Schema) (same, deeper []*jsonschema.Schema) {
	add := func(to *[]*jsonschema.Schema, ss ...*jsonschema.Schema) {
		for _, x := range ss {
			if x != nil {
				*to = append(*to, x)
			}
		}
	}
	addAny := func(to *[]*jsonschema.Schema, v any) { // nil, bool, *Schema or []*Schema
		switch v := v.(type) {
		case *jsonschema.Schema:
			add(to, v)
		case []*jsonschema.Schema:
			add(to, v...)
		}
	}
	add(&same, s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else)
	if s.DynamicRef != nil {
		add(&same, s.DynamicRef.Ref)
	}
	add(&same, s.AllOf...)
	add(&same, s.AnyOf...)
	add(&same, s.OneOf...)
	for _, d := range s.DependentSchemas {
		add(&same, d)
	}
	for _, d := range s.Dependencies {
		addAny(&same, d)
	}

	add(&deeper, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
	for _, p := range s.Properties {
		add(&deeper, p)
	}
	for _, p := range s.PatternProperties {
		add(&deeper, p)
	}
	add(&deeper, s.PrefixItems...)
	addAny(&deeper, s.AdditionalProperties)
	addAny(&deeper, s.Items)
	addAny(&deeper, s.AdditionalItems)
	return same, deeper
}

// maxSchemaErrorBytes bounds what an invalid_schema message says of the schema.
const maxSchemaErrorBytes = 512

// compileErrorText says what is wrong with a schema the library refused, and where: a
// keyword's JSON pointer in the schema ("at '/properties/x/type': …"), or a location relative
// to the schema ("#/$defs/nope"), on one line.
func compileErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		// The library's text says only "not valid against metaschema" on its first line.
		return "not a valid JSON Schema: " + issuesMessage(schemaIssues(ve))
	}
	var ire *jsonschema.InvalidRegexError
	var pnc patternNotCompiled
	if errors.As(err, &ire) && errors.As(ire.Err, &pnc) {
		return "at " + singleQuoted(relativeLocations(ire.URL)) + ": " + patternNotCompiledText(ire.Regex, pnc)
	}
	return oneLine(relativeLocations(err.Error()))
}

// relativeLocations writes locations inside the schema relative to it: "#/$defs/a" rather
// than the URL the executor compiles it under.
func relativeLocations(s string) string { return strings.ReplaceAll(s, schemaURL, "") }

// oneLine joins the lines of a multi-line error text with "; ".
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
	}
	return strings.Join(lines, "; ")
}

// schemaIssueText is the text of a failure of the schema against its meta-schema: the library's
// own, which may quote the schema's values (the schema is the server's, and public). A pattern
// too costly to compile (patternNotCompiled) is quoted only in part, so that the bound it
// exceeds is not cut off the message.
func schemaIssueText(k jsonschema.ErrorKind) string {
	var pnc patternNotCompiled
	if f, ok := k.(*kind.Format); ok && errors.As(f.Err, &pnc) {
		s, _ := f.Got.(string)
		return patternNotCompiledText(s, pnc)
	}
	return relativeLocations(k.LocalizedString(printer))
}

// patternNotCompiledText says that pattern is not compiled, and why.
func patternNotCompiledText(pattern string, pnc patternNotCompiled) string {
	return "the pattern " + singleQuoted(truncateString(pattern, 64)) + " " + pnc.why
}
