package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// Validation of arguments against a reference, on real schemas: the 527 inputSchemas of the
// retrieval evaluation (real MCP servers), the demo servers' input and output schemas and a
// few written here for what those lack (formats under draft-07, ECMAScript patterns, unicode
// lengths, integers, $ref). For each schema and seed: arguments generated to match it, and
// mutations of them (a wrong type, a required member left out, an extra member, an enum or
// pattern missed, a string at its length bounds counted in code points, numbers at the
// edges: 1.0, -0, 1e2, 1e400, huge ones), written out as JSON in varied ways (escapes,
// surrogate pairs, lone surrogates, invalid UTF-8, white space, member order, a member named
// twice, deep nesting). The same text is also checked as the structuredContent of a result
// against the schema as an outputSchema.
//
// The reference: encoding/json with UseNumber decoding the same bytes, and the same library
// compiling the same raw schema with its defaults (2020-12 unless $schema says otherwise, no
// loader) and validating. Deliberate differences (README), each decided here independently of
// the executor's code: arguments nested deeper than maxArgumentDepth, naming a member twice in
// one object, or holding a number beyond numbers.go's bounds are refused invalid_arguments; a
// $ref cycle, a schema too deep or too large, or holding such a number is invalid_schema (a
// result is passed on unchecked for those); a pattern is ECMA-262, so a schema whose patterns Go's regexp
// does not read as ECMAScript does is left out (pattern_ecma_test.go covers those).
//
// MCPSTREAM_TEST_VALID_SEEDS / _SEED0 run more seeds.
func TestValidateArgumentsDifferential(t *testing.T) {
	first, seeds := envSeeds("MCPSTREAM_TEST_VALID", 2)
	schemas := differentialSchemas(t, 1)
	var st diffStats
	rngs := make([]*rand.Rand, seeds)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(first+uint64(i), 0x5eed))
	}
	for _, s := range schemas {
		// one definition of each, as a listed tool would be: compiled once, its copies reused
		tl := &tool{Public: "s__t", InputSchema: s.raw}
		out := &tool{Public: "s__t", InputSchema: json.RawMessage(`{}`), OutputSchema: s.raw}
		for i, rng := range rngs {
			for range 5 {
				g := &argGen{r: rng, root: s.doc}
				v := g.value(s.doc, 0)
				if rng.IntN(3) > 0 {
					v = g.mutate(v, s.doc)
				}
				if _, ok := v.(map[string]any); !ok && rng.IntN(4) > 0 {
					v = map[string]any{}
				}
				args := g.encode(v)
				if !st.checkOutput(t, s, out, args) || !st.check(t, s, tl, args) {
					t.Fatalf("seed %d (MCPSTREAM_TEST_VALID_SEED0=%d MCPSTREAM_TEST_VALID_SEEDS=1)", first+uint64(i), first+uint64(i))
				}
			}
		}
	}
	t.Logf("%d schemas, %d cases: %d accepted, %d refused by the schema, %d deliberate refusals, %d invalid_schema",
		len(schemas), st.cases, st.accepted, st.refused, st.deliberate, st.badSchema)
	if st.accepted < st.cases/10 || st.refused < st.cases/10 {
		t.Errorf("the generator is off: %d accepted and %d refused of %d", st.accepted, st.refused, st.cases)
	}
}

type diffSchema struct {
	name string
	raw  json.RawMessage
	doc  any // decoded with UseNumber
	ref  *jsonschema.Schema
	err  error // the reference does not compile it
}

type diffStats struct {
	cases, accepted, refused, deliberate, badSchema int
}

// check compares the executor's verdict on args with the reference's; false after a mismatch
// (reported).
func (st *diffStats) check(t *testing.T, s diffSchema, tl *tool, args []byte) bool {
	t.Helper()
	st.cases++
	got := validateArguments(tl, args)
	want, why := referenceVerdict(s, args)
	fail := func(format string, a ...any) bool {
		t.Errorf("schema %s %.600s\narguments %.600q\n%s (got %+v)", s.name, s.raw, args, fmt.Sprintf(format, a...), got)
		return false
	}
	switch want {
	case "invalid_schema":
		st.badSchema++
		if got == nil || got.Code != subjects.CodeInvalidSchema {
			return fail("want invalid_schema: %s", why)
		}
	case "deliberate":
		st.deliberate++
		if got == nil || got.Code != subjects.CodeInvalidArguments {
			return fail("want invalid_arguments (deliberate: %s)", why)
		}
	case "refused":
		st.refused++
		if got == nil || got.Code != subjects.CodeInvalidArguments {
			return fail("want invalid_arguments: the reference refuses them: %s", why)
		}
	case "accepted":
		st.accepted++
		if got != nil {
			return fail("want them accepted, as the reference does")
		}
	}
	return true
}

// checkOutput compares the executor's check of a result whose structuredContent is v (JSON
// text) against the schema as an outputSchema with the reference's: a result that does not
// match is failed protocol_error; one the executor cannot judge is passed on unchecked (an
// outputSchema that cannot be used, a structuredContent nested deeper than maxResultDepth or
// holding a number beyond numbers.go's bounds). A member named twice is read as the reference
// reads it (the last one), not refused: the call ran.
func (st *diffStats) checkOutput(t *testing.T, s diffSchema, tl *tool, v []byte) bool {
	t.Helper()
	got := checkOutput(tl, append(append([]byte(`{"content":[],"structuredContent":`), v...), '}'))
	want, why := "", ""
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var inst any
	switch err := dec.Decode(&inst); {
	case err != nil:
		t.Fatalf("generated text that is not JSON: %q", v)
	case s.err != nil:
		want, why = "unchecked", s.err.Error()
	case tokenDepth(v) > maxResultDepth:
		want, why = "unchecked", "too deep"
	default:
		if n, huge := decodedHugeNumber(inst); huge {
			want, why = "unchecked", "holds the number "+n
		} else if err := s.ref.Validate(inst); err != nil {
			want, why = "fail", firstLine(err.Error())
		} else {
			want = "ok"
		}
	}
	ok := true
	switch want {
	case "unchecked":
		ok = got.fail == nil && got.unchecked != ""
	case "fail":
		ok = got.fail != nil && got.fail.Code == subjects.CodeProtocolError && got.unchecked == ""
	case "ok":
		ok = got.fail == nil && got.unchecked == ""
	}
	if !ok {
		t.Errorf("outputSchema %s %.600s\nstructuredContent %.600q\nwant %s %s, got %+v", s.name, s.raw, v, want, why, got)
	}
	return ok
}

// referenceVerdict decides args against s without the executor's code: "invalid_schema",
// "deliberate" (refused by the executor's documented rules), "refused" or "accepted".
func referenceVerdict(s diffSchema, args []byte) (string, string) {
	if s.err != nil {
		return "invalid_schema", s.err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "deliberate", "not JSON: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return "deliberate", "not JSON: trailing data"
	}
	if _, ok := v.(map[string]any); !ok {
		if v == nil {
			v = map[string]any{} // (null arguments are none: {})
		} else {
			return "deliberate", "not an object"
		}
	}
	if d := tokenDepth(args); d > maxArgumentDepth {
		return "deliberate", fmt.Sprintf("nests %d levels", d)
	}
	if name, dup := tokenDuplicate(args); dup {
		return "deliberate", "names " + strconv.Quote(name) + " twice"
	}
	if n, huge := decodedHugeNumber(v); huge {
		return "deliberate", "holds the number " + n
	}
	if err := s.ref.Validate(v); err != nil {
		return "refused", firstLine(err.Error())
	}
	return "accepted", ""
}

// tokenDepth is how deeply the JSON text nests, from encoding/json's tokens.
func tokenDepth(text []byte) int {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber() // (else a number beyond float64 ends the tokens)
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return most
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			most = max(most, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// tokenDuplicate finds a member named twice in one object (names as encoding/json decodes
// them), from encoding/json's tokens.
func tokenDuplicate(text []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	type frame struct {
		obj   bool
		names map[string]bool
		key   bool // the next token of an object is a name
	}
	var stack []*frame
	value := func() { // a value ended: the object it is in expects a name next
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, names: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			value()
			continue
		}
		if top != nil && top.obj && top.key {
			name := tok.(string)
			if top.names[name] {
				return name, true
			}
			top.names[name] = true
			top.key = false
			continue
		}
		value()
	}
}

// decodedHugeNumber finds a number beyond numbers.go's bounds (as README states them: more
// than 1000 characters, or an exponent beyond ±1000).
func decodedHugeNumber(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if len(s) > 1000 {
			return s[:20] + "…", true
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			exp, err := strconv.ParseInt(s[i+1:], 10, 64)
			if err != nil || exp > 1000 || exp < -1000 {
				return s, true
			}
		}
	case map[string]any:
		for _, e := range v {
			if n, ok := decodedHugeNumber(e); ok {
				return n, true
			}
		}
	case []any:
		for _, e := range v {
			if n, ok := decodedHugeNumber(e); ok {
				return n, true
			}
		}
	}
	return "", false
}

// referenceCompile compiles raw as the library does by default (Go's regexp for patterns).
func referenceCompile(raw []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// differentialSchemas are the schemas the test runs, each compiled by the reference.
func differentialSchemas(t *testing.T, sample int) []diffSchema {
	t.Helper()
	var out []diffSchema
	add := func(name string, raw json.RawMessage) {
		var doc any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, diffSchema{name: name, raw: raw, doc: doc})
	}
	f, err := os.Open(filepath.Join("..", "testdata", "eval", "retrieval", "tools.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			ID          string          `json:"id"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		add(line.ID, line.InputSchema)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 527 {
		t.Fatalf("read %d schemas of the retrieval evaluation, want 527", len(out))
	}
	// The demo servers' tools, the optional ones too.
	for _, name := range demoservers.Names() {
		extras, err := demoservers.ExtraTools(name)
		if err != nil {
			t.Fatal(err)
		}
		control := filepath.Join(t.TempDir(), "control.json")
		data, _ := json.Marshal(demoservers.Control{Add: extras})
		if err := os.WriteFile(control, data, 0o644); err != nil {
			t.Fatal(err)
		}
		srv, err := demoservers.New(name, demoservers.Options{ControlFile: control, Logs: 1})
		if err != nil {
			t.Fatal(err)
		}
		tools := srv.ListTools()
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			data, err := json.Marshal(tools[n].Tool)
			if err != nil {
				t.Fatal(err)
			}
			var def struct {
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			}
			if err := json.Unmarshal(data, &def); err != nil {
				t.Fatal(err)
			}
			add(name+"::"+n, def.InputSchema)
			if len(def.OutputSchema) > 0 {
				add(name+"::"+n+" (outputSchema)", def.OutputSchema)
			}
		}
	}
	for i, raw := range extraDifferentialSchemas {
		add(fmt.Sprintf("extra %d", i), json.RawMessage(raw))
	}
	// Hostile schemas the reference compiles (it meets a cycle only when validating a value
	// that reaches it) and the executor refuses, as README says: a $ref cycle, nesting past
	// maxSchemaDepth, more than maxSchemaObjects objects, a number beyond numbers.go's bounds.
	// (the remote ones name a listener that must never be connected to: nothing is fetched)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fetched.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		if n := fetched.Load(); n > 0 {
			t.Errorf("a schema's $ref or $schema was fetched (%d connections)", n)
		}
	})
	remote := "http://" + ln.Addr().String()
	deep := `{"type":"object"}`
	for range maxSchemaDepth {
		deep = `{"not":` + deep + `}`
	}
	hostile := map[string]string{ // (refused by the reference too: remote, file)
		"a $ref cycle":           `{"type":"object","properties":{"k":{"$ref":"#/properties/k"}}}`,
		"a $dynamicRef cycle":    `{"$dynamicAnchor":"n","type":"object","anyOf":[{"$dynamicRef":"#n"}]}`,
		"too deep":               deep,
		"too many objects":       `{"type":"object","allOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, maxSchemaObjects), ",") + `]}`,
		"a huge number":          `{"type":"object","properties":{"n":{"maximum":1e1001}}}`,
		"a remote $ref":          `{"type":"object","properties":{"k":{"$ref":"` + remote + `/schema.json"}}}`,
		"a file $ref":            `{"$ref":"file:///etc/passwd"}`,
		"a remote $schema":       `{"$schema":"` + remote + `/meta.json","type":"object"}`,
		"a relative remote $ref": `{"$id":"` + remote + `/x/root.json","properties":{"k":{"$ref":"other.json"}}}`,
	}
	names := make([]string, 0, len(hostile))
	for name := range hostile {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		add("hostile: "+name, json.RawMessage(hostile[name]))
	}
	// Left out: patterns Go's regexp reads otherwise than ECMAScript (or does not read); and
	// with sample > 1, all but every sample-th of the real schemas.
	kept, left := out[:0], 0
	for i, s := range out {
		mine := strings.HasPrefix(s.name, "extra ") || strings.HasPrefix(s.name, "hostile: ")
		switch {
		case !patternsAgree(s.doc):
			left++
		case mine || i%sample == 0:
			if deliberate, ok := strings.CutPrefix(s.name, "hostile: "); ok {
				// (compiling 10,000 schema objects takes the reference seconds under -race)
				s.err = errors.New("deliberate: " + deliberate)
			} else {
				s.ref, s.err = referenceCompile(s.raw)
			}
			kept = append(kept, s)
		}
	}
	if left > 3 {
		t.Fatalf("%d schemas left out for their patterns, want at most 3", left)
	}
	return kept
}

// patternsAgree reports whether every pattern of the schema means the same to Go's regexp as
// to ECMAScript, as far as the generator's strings go: no ".", "\s", "\S" (which goSyntax
// rewrites), and Go compiles it.
func patternsAgree(doc any) bool {
	ok := true
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "patternProperties" {
					if m, isMap := e.(map[string]any); isMap {
						for p := range m {
							ok = ok && patternAgrees(p)
						}
					}
				}
				walk(e, k)
			}
		case []any:
			for _, e := range v {
				walk(e, "")
			}
		case string:
			if key == "pattern" {
				ok = ok && patternAgrees(v)
			}
		}
	}
	walk(doc, "")
	return ok
}

func patternAgrees(p string) bool {
	re, err := compilePattern(p, nil)
	_, isGo := re.(goPattern)
	return err == nil && isGo && !strings.ContainsAny(strings.ReplaceAll(p, `\\`, ""), ".") &&
		!strings.Contains(p, `\s`) && !strings.Contains(p, `\S`)
}

// extraDifferentialSchemas cover what the real schemas hardly have.
var extraDifferentialSchemas = []string{
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"email":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"},"at":{"type":"string","format":"date-time"},"ip":{"type":"string","format":"ipv4"},"ip6":{"type":"string","format":"ipv6"},"day":{"type":"string","format":"date"},"id":{"type":"string","format":"uuid"}},"required":["email"]}`,
	`{"type":"object","properties":{"email":{"type":"string","format":"email"},"at":{"type":"string","format":"date-time"}},"required":["email"],"additionalProperties":false}`,
	`{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":4},"tag":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"kind":{"enum":["a","b","é",1,null]},"n":{"type":"integer","minimum":-3,"exclusiveMaximum":10,"multipleOf":3},"x":{"type":"number","exclusiveMinimum":0,"maximum":1.5},"c":{"const":0}},"required":["name","kind"],"additionalProperties":false}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","maximum":5,"exclusiveMaximum":true},"s":{"type":"string","maxLength":3}},"required":["n"]}`,
	`{"type":"object","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"],"additionalProperties":false}},"properties":{"list":{"$ref":"#/$defs/node"},"items":{"type":"array","items":{"type":"string","maxLength":2},"minItems":1,"maxItems":3,"uniqueItems":true}},"required":["list"]}`,
	`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]},"b":{"anyOf":[{"type":"null"},{"type":"array","prefixItems":[{"type":"boolean"}],"items":false}]},"c":{"not":{"type":"string"}}},"dependentRequired":{"a":["b"]},"propertyNames":{"maxLength":3},"minProperties":1,"maxProperties":3}`,
	`{"type":"object","patternProperties":{"^x_[a-z]+$":{"type":"number"}},"additionalProperties":{"type":"string","minLength":1}}`,
	`{"type":"object","if":{"properties":{"k":{"const":"n"}},"required":["k"]},"then":{"properties":{"v":{"type":"number"}},"required":["v"]},"else":{"properties":{"v":{"type":"string"}}},"unevaluatedProperties":false,"properties":{"k":{"type":"string"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"port":{"type":"integer","minimum":1,"maximum":65535}},"properties":{"host":{"type":"string","format":"hostname"},"port":{"$ref":"#/definitions/port"}},"required":["host","port"],"additionalProperties":false}`,
	`{"type":"object","definitions":{"port":{"type":"integer","minimum":1,"maximum":65535}},"properties":{"port":{"$ref":"#/definitions/port"}},"required":["port"]}`,
	`{"type":"object","properties":{"k":{"$ref":"#/definitions/k"}},"definitions":{"k":{"type":"number","multipleOf":0}}}`,
	`{"type":"object","properties":{"k":{"$ref":"https://example.com/remote.json"}}}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":1e-400,"maximum":1e400}}}`,
	`true`,
	`{}`,
}

// argGen generates arguments for a schema, mutates them and writes them as JSON.
type argGen struct {
	r    *rand.Rand
	root any
}

// resolve follows a local $ref ("#", "#/a/b"); nil for any other.
func (g *argGen) resolve(ref string) any {
	if ref == "#" {
		return g.root
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	cur := g.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

var genStrings = []string{"", "a", "ab", "abc", "abcd", "é", "😀", "😀😀", "e\u0301", "日本語", "x y", "AB-123", "a@b.co",
	"https://example.com/a?b=c", "2024-02-29T12:00:00Z", "2024-13-01", "192.168.0.1", "::1", "0.0.0.0",
	"550e8400-e29b-41d4-a716-446655440000", "x_ab", "\u00a0", "\ufeff", "\u2028", "\ud7ff", "\U0010ffff", "\ufffd",
	"<b>&amp;</b>", "a\"b\\c", "\x00\x1f", "\t\n", "AAPL", "GDZ", "AS13335", "n", "1", "true", "null"}

func (g *argGen) str(s map[string]any) string {
	if g.r.IntN(3) == 0 {
		// at a length bound, counted in code points, of characters of 1 to 4 bytes
		lo, hasLo := num(s["minLength"])
		hi, hasHi := num(s["maxLength"])
		n := 1 + g.r.IntN(4)
		switch {
		case hasLo && (!hasHi || g.r.IntN(2) == 0):
			n = int(lo) + g.r.IntN(3) - 1
		case hasHi:
			n = int(hi) + g.r.IntN(3) - 1
		}
		n = max(0, min(n, 64))
		var b strings.Builder
		for range n {
			b.WriteString([]string{"a", "é", "日", "😀", "\ufffd"}[g.r.IntN(5)])
		}
		return b.String()
	}
	return genStrings[g.r.IntN(len(genStrings))]
}

var genNumbers = []string{"0", "-0", "1", "-1", "1.0", "1e2", "1E+2", "100.00", "2.5", "3", "6", "9", "10", "-3", "0.1", "0.3",
	"1e308", "1e400", "-1e400", "1e-400", "12345678901234567890", "65535", "65536", "1e1000", "1e-1000", "-0.0e-0", "5", "4.999999999999999999999"}

func (g *argGen) number(s map[string]any, integer bool) any {
	if g.r.IntN(2) == 0 {
		return json.Number(genNumbers[g.r.IntN(len(genNumbers))])
	}
	lo, hasLo := num(s["minimum"])
	hi, hasHi := num(s["maximum"])
	if !hasLo {
		lo = 0
		if hasHi {
			lo = hi - 10
		}
	}
	if !hasHi {
		hi = lo + 10
	}
	f := lo + g.r.Float64()*(hi-lo)
	if integer || g.r.IntN(2) == 0 {
		return json.Number(strconv.FormatFloat(float64(int64(f)), 'f', -1, 64))
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// value generates a value meant to match schema s (a best effort: the reference decides).
func (g *argGen) value(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > 8 {
		return g.any(depth)
	}
	if ref, ok := m["$ref"].(string); ok {
		if t := g.resolve(ref); t != nil {
			return g.value(t, depth+1)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[g.r.IntN(len(e))]
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if bs, ok := m[k].([]any); ok && len(bs) > 0 {
			return g.value(bs[g.r.IntN(len(bs))], depth+1)
		}
	}
	if bs, ok := m["allOf"].([]any); ok && len(bs) > 0 && m["type"] == nil && m["properties"] == nil {
		return g.value(bs[g.r.IntN(len(bs))], depth+1)
	}
	typ, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[g.r.IntN(len(ts))].(string)
	}
	if typ == "" {
		switch {
		case m["properties"] != nil || m["required"] != nil || m["additionalProperties"] != nil:
			typ = "object"
		case m["items"] != nil:
			typ = "array"
		}
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		req := map[string]bool{}
		if rs, ok := m["required"].([]any); ok {
			for _, r := range rs {
				if name, ok := r.(string); ok {
					req[name] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			if req[k] || g.r.IntN(2) == 0 {
				obj[k] = g.value(props[k], depth+1)
			}
		}
		for k := range req {
			if _, ok := obj[k]; !ok {
				obj[k] = g.any(depth + 1)
			}
		}
		if pp, ok := m["patternProperties"].(map[string]any); ok && g.r.IntN(2) == 0 {
			for _, v := range pp {
				obj["x_ab"] = g.value(v, depth+1)
				break
			}
		}
		return obj
	case "array":
		n := g.r.IntN(4)
		if lo, ok := num(m["minItems"]); ok && g.r.IntN(2) == 0 {
			n = int(lo)
		}
		if hi, ok := num(m["maxItems"]); ok && n > int(hi) {
			n = int(hi)
		}
		arr := []any{}
		for range min(n, 8) {
			arr = append(arr, g.value(m["items"], depth+1))
		}
		return arr
	case "string":
		return g.str(m)
	case "integer":
		return g.number(m, true)
	case "number":
		return g.number(m, false)
	case "boolean":
		return g.r.IntN(2) == 0
	case "null":
		return nil
	}
	return g.any(depth)
}

// any is a value of any type.
func (g *argGen) any(depth int) any {
	switch k := g.r.IntN(7); {
	case k == 0 && depth < 6:
		return map[string]any{"k": g.any(depth + 1)}
	case k == 1 && depth < 6:
		return []any{g.any(depth + 1), g.str(nil)}
	case k == 2:
		return g.number(nil, false)
	case k == 3:
		return g.r.IntN(2) == 0
	case k == 4:
		return nil
	}
	return g.str(nil)
}

// mutate changes v somewhere: a member's value replaced by one of another type or at an edge,
// a member removed, one added.
func (g *argGen) mutate(v any, s any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return g.any(0)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sm, _ := s.(map[string]any)
	props, _ := sm["properties"].(map[string]any)
	switch k := g.r.IntN(6); {
	case k == 0 && len(keys) > 0: // a member left out (a required one, maybe)
		delete(obj, keys[g.r.IntN(len(keys))])
	case k == 1: // a member the schema may not allow
		obj[[]string{"zz_extra", "x_ab", "A", "\u0061", "é", "😀", ""}[g.r.IntN(7)]] = g.any(1)
	case k == 2 && len(keys) > 0: // a value of any type
		obj[keys[g.r.IntN(len(keys))]] = g.any(1)
	case k == 3 && len(keys) > 0: // a value near what the schema allows
		key := keys[g.r.IntN(len(keys))]
		ps, _ := props[key].(map[string]any)
		switch cur := obj[key].(type) {
		case string:
			if g.r.IntN(2) == 0 {
				obj[key] = cur + []string{"x", "é", "😀", " "}[g.r.IntN(4)]
			} else {
				obj[key] = strings.ToUpper(cur)
			}
		case json.Number:
			obj[key] = g.number(ps, false)
		case map[string]any:
			obj[key] = g.mutate(cur, ps)
		default:
			obj[key] = g.value(ps, 1)
		}
	case k == 4 && len(keys) > 0: // deep nesting at and past the bound
		var inner any = "x"
		for range maxArgumentDepth - 2 + g.r.IntN(4) {
			inner = []any{inner}
		}
		obj[keys[g.r.IntN(len(keys))]] = inner
	default: // a string at a length bound
		if len(keys) > 0 {
			key := keys[g.r.IntN(len(keys))]
			ps, _ := props[key].(map[string]any)
			obj[key] = g.str(ps)
		}
	}
	return obj
}

// encode writes v as JSON in one of many ways: member order, white space, escapes (of any
// character, surrogate pairs), and now and then a lone surrogate, an invalid UTF-8 byte, or a
// member named twice.
func (g *argGen) encode(v any) []byte {
	var b bytes.Buffer
	g.write(&b, v)
	return b.Bytes()
}

func (g *argGen) space(b *bytes.Buffer) {
	if g.r.IntN(4) == 0 {
		b.WriteString([]string{" ", "\n", "\t", "\r\n  "}[g.r.IntN(4)])
	}
}

func (g *argGen) write(b *bytes.Buffer, v any) {
	g.space(b)
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			g.writeString(b, k)
			g.space(b)
			b.WriteByte(':')
			g.write(b, v[k])
		}
		if len(keys) > 0 && g.r.IntN(40) == 0 { // a member named twice, spelled another way
			b.WriteByte(',')
			g.writeString(b, keys[g.r.IntN(len(keys))])
			b.WriteString(`:`)
			g.write(b, g.any(3))
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			g.write(b, e)
		}
		b.WriteByte(']')
	case string:
		g.writeString(b, v)
	case json.Number:
		b.WriteString(string(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		data, _ := json.Marshal(v)
		b.Write(data)
	}
	g.space(b)
}

func (g *argGen) writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	if g.r.IntN(60) == 0 {
		b.WriteString([]string{`\ud800`, `\udfff`, "\xff", "\xc3", `\ud83d\ude00`, `\ufffd`}[g.r.IntN(6)])
	}
	escapeAll := g.r.IntN(8) == 0
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || escapeAll || g.r.IntN(20) == 0:
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(b, `\u%04x\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		case r == '/' && g.r.IntN(2) == 0:
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// TestValidateArgumentsOverNATS: a sample of the same schemas listed by a server, called
// through a real executor over NATS: the verdict reaches the caller as README promises
// (accepted: the call runs, ok; refused: refused, invalid_arguments or invalid_schema, nothing
// dispatched). And a result checked against an outputSchema that does not compile (a
// malformed subschema under "definitions") is passed on, unchecked, not answered internal or
// outcome_unknown.
func TestValidateArgumentsOverNATS(t *testing.T) {
	first, seeds := envSeeds("MCPSTREAM_TEST_VALID", 2)
	sample := differentialSchemas(t, 25)
	env := startNATS(t, natsembed.Config{})
	ttl := int64(3_600_000)
	var items []json.RawMessage
	for i, s := range sample {
		item, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("t%d", i), "inputSchema": s.raw,
			"annotations": map[string]any{"readOnlyHint": true, "idempotentHint": true}})
		items = append(items, item)
	}
	badOutput := `{"type":"object","properties":{"n":{"$ref":"#/definitions/n"}},"definitions":{"n":{"type":"number","multipleOf":0}}}`
	item, _ := json.Marshal(map[string]any{"name": "out", "inputSchema": map[string]any{"type": "object"}, "outputSchema": json.RawMessage(badOutput),
		"annotations": map[string]any{"readOnlyHint": false, "idempotentHint": false}})
	items = append(items, item)
	r := &rig{t: t, env: env, control: map[string]string{}, dir: t.TempDir(), client: Client{NC: env.NC, JS: env.JS}}
	r.publishRegistry(subjects.RegistrySnapshot("diff", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "diff", Kind: subjects.KindTools, Fingerprint: "fp-diff", ListedAt: time.Now(), TTLMs: &ttl, Pages: 1, Items: items})
	disp := &countingDispatch{n: &counter{}}
	ex := r.startExecutor(Config{Dispatcher: disp, Relister: noDispatch{t}}, env.NC)
	waitFor(t, "the tools listed", func() bool { return ex.reg.lookup("diff__out") != nil })

	cases := 0
	for seed := first; seed < first+uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x7a75))
		for i, s := range sample {
			g := &argGen{r: rng, root: s.doc}
			v := g.value(s.doc, 0)
			if rng.IntN(2) == 0 {
				v = g.mutate(v, s.doc)
			}
			if _, ok := v.(map[string]any); !ok {
				v = map[string]any{}
			}
			args := g.encode(v)
			want, why := referenceVerdict(s, args)
			public := fmt.Sprintf("diff__t%d", i)
			before := disp.n.get(fmt.Sprintf("t%d", i))
			res := r.call("local", public, string(args))
			ran := disp.n.get(fmt.Sprintf("t%d", i)) - before
			cases++
			wantCode := map[string]string{"invalid_schema": subjects.CodeInvalidSchema, "deliberate": subjects.CodeInvalidArguments,
				"refused": subjects.CodeInvalidArguments}[want]
			switch {
			case want == "accepted" && (res.Status != subjects.CallOK || ran != 1):
				t.Errorf("seed %d, schema %s, arguments %.300q: got %s %+v (ran %d), want ok, ran once", seed, s.name, args, res.Status, res.Error, ran)
			case want != "accepted" && (res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != wantCode || ran != 0):
				t.Errorf("seed %d, schema %s, arguments %.300q: got %s %+v (ran %d), want refused %s (%s), not run", seed, s.name, args, res.Status, res.Error, ran, wantCode, why)
			}
		}
	}
	res := r.call("local", "diff__out", `{}`)
	if res.Status != subjects.CallOK || res.Error != nil || !strings.Contains(string(res.Result), `"structuredContent":{"n":1}`) {
		t.Errorf("a result against an outputSchema that does not compile: got %s %+v %s, want ok, passed on unchecked", res.Status, res.Error, res.Result)
	}
	t.Logf("%d tools, %d calls", len(sample), cases+1)
}

// countingDispatch runs every call at once, counting them by tool: its result has a
// structuredContent.
type countingDispatch struct{ n *counter }

func (d *countingDispatch) Dispatch(_ context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.n.add(req.Tool)
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":1}}`)}
}
