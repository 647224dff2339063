package executor

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// libraryStream is the byte stream the library's writeHash (util.go) hashes v by, copied from
// it: the reference uniqueCoster's hashes must agree with.
func libraryStream(v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		out := []byte{0}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, libraryStream(k)...)
			out = append(out, libraryStream(v[k])...)
		}
		return out
	case []any:
		out := []byte{1}
		for _, e := range v {
			out = append(out, libraryStream(e)...)
		}
		return out
	case nil:
		return []byte{2}
	case bool:
		if v {
			return []byte{3, 1}
		}
		return []byte{3, 0}
	case string:
		return append([]byte{4}, v...)
	case json.Number:
		r, _ := new(big.Rat).SetString(string(v))
		return append(append([]byte{5}, r.Num().Bytes()...), r.Denom().Bytes()...)
	}
	return nil
}

// The coster hashes every value by exactly the stream the library hashes it by, so that the
// items it compares are the ones the library compares.
func TestUniqueStreamMatchesLibrary(t *testing.T) {
	values := []string{
		`0`, `-0`, `1`, `-1`, `255`, `256`, `65535`, `65536`, `18446744073709551615`, `18446744073709551616`,
		`-9223372036854775808`, `1.5`, `-1.5`, `1e3`, `1E-3`, `0.125`, `123456789.000`, `5e-324`,
		`""`, `"a"`, `"a\u0004b"`, `["a","b"]`, `[]`, `{}`, `null`, `true`, `false`,
		`{"b":1,"a":[1,{"c":null}]}`, `[[1,-1],{"x":"\u0004"},2.5]`,
	}
	var hashes []streamHash
	var streams [][]byte
	for _, s := range values {
		v, err := decodeInstance([]byte(s))
		if err != nil {
			t.Fatal(s, err)
		}
		u := uniqueCoster{left: maxUniqueItemsCost}
		got, _ := u.node(v)
		want := newStream().bytes(libraryStream(v))
		if got != want {
			t.Fatalf("%s: hash %v, want that of the library's stream %v", s, got, want)
		}
		hashes, streams = append(hashes, got), append(streams, libraryStream(v))
	}
	for i := range values {
		for j := range values {
			if (hashes[i] == hashes[j]) != (string(streams[i]) == string(streams[j])) {
				t.Fatalf("%s and %s: hashes equal %v, streams equal %v", values[i], values[j], hashes[i] == hashes[j], string(streams[i]) == string(streams[j]))
			}
		}
	}
}

// sameDecimal decides as big.Rat does (as the library's equals).
func TestSameDecimal(t *testing.T) {
	nums := []string{`0`, `-0`, `0.0`, `0e5`, `1`, `1.0`, `10e-1`, `0.1e1`, `100`, `1e2`, `1E+2`, `-1`, `-1.0`,
		`1.5`, `15e-1`, `0.015e2`, `2`, `12`, `120e-1`, `1.2e1`, `0.00012e5`, `123`, `1230e-1`}
	for _, a := range nums {
		for _, b := range nums {
			x, _ := new(big.Rat).SetString(a)
			y, _ := new(big.Rat).SetString(b)
			if got := sameDecimal(a, b); got != (x.Cmp(y) == 0) {
				t.Fatalf("sameDecimal(%s, %s) = %v", a, b, got)
			}
		}
	}
}

// nestedHashes is {"a":...} nesting depth arrays of 21 items (the first holds the next), the
// innermost holding n distinct numbers "<i><exp>": the library hashes (parsing them as big.Rat)
// every item of an array of more than 20, everything inside it too, so each number once per
// level.
func nestedHashes(depth, n int, exp string) string {
	var b strings.Builder
	b.WriteString(`{"a":`)
	for range depth {
		b.WriteByte('[')
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d%s", i+1, exp)
	}
	for d := range depth {
		b.WriteString(`]`)
		for i := range 20 * min(depth-1-d, 1) {
			fmt.Fprintf(&b, ",%d", i)
		}
	}
	b.WriteString(`}`)
	return b.String()
}

func costly(t *testing.T, args string) bool {
	t.Helper()
	v, err := decodeInstance([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	_, c := costlyUniqueItems(v, maxUniqueItemsCost)
	return c
}

// A number's comparison (and hash) costs the library a big.Rat parse, which grows with its
// exponent as much as with its length: 649 distinct 14-vectors of ±1e1000 (68 KB) took the
// library 6 s (±1: 0.45 s at the same count), costed as if they were ±1; and the hashing of
// items was not costed at all: arrays of 21 items nested 60 deep, the innermost holding 10,000
// numbers "<i>e1000" (100 KB), took it 3.5 s, 60 hashes of each, with no comparison to count
// (4 MB: past the backstop and its grace, the tool unusable for everyone).
func TestUniqueItemsCostUnderCounted(t *testing.T) {
	if !costly(t, signedNumbers(649, 14, "1e1000")) {
		t.Fatal("±1e1000 vectors: not costly")
	}
	if !costly(t, nestedHashes(60, 10_000, "e1000")) {
		t.Fatal("nested hashes of 1e1000: not costly")
	}
	// and as the library checks them (hookUniqueItems), nested
	nested := &tool{Public: "s__n", InputSchema: []byte(`{"$defs":{"n":{"uniqueItems":true,"items":{"$ref":"#/$defs/n"}}},"properties":{"a":{"$ref":"#/$defs/n"}}}`)}
	lim := defaultValidationLimits
	lim.wall = 10 * time.Minute // (only a hang fails: -race is slow)
	for _, args := range []string{signedNumbers(649, 14, "1e1000"), nestedHashes(60, 10_000, "e1000")} {
		wantCode(t, validateWithin(t, nested, args, lim), subjects.CodeInvalidArguments, "uniqueItems")
	}
	if e := validateWithin(t, nested, nestedHashes(20, 2_000, ""), lim); e != nil {
		t.Fatalf("nested ordinary numbers: %+v", e)
	}
	// the same shapes, of ordinary size and numbers, pass
	if costly(t, signedNumbers(256, 14, "1")) || costly(t, nestedHashes(60, 10_000, "")) {
		t.Fatal("ordinary arrays found costly")
	}
	// a large flat array, and a matrix, of ordinary numbers pass
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range 300_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d.%d", i, i%97)
	}
	b.WriteString(`],"m":[`)
	for i := range 300 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j := range 300 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d.25", i*j-4000)
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	if costly(t, b.String()) {
		t.Fatal("ordinary large arrays found costly")
	}
}

// ratStream's way without big.Rat (smallRat) writes what big.Rat does, at and past its bounds.
func TestRatStreamMatchesLibrary(t *testing.T) {
	nums := []string{`0`, `-0`, `0.0`, `-0.0e5`, `0e-30`, `0.5`, `-0.5`, `123.456`, `0.000123`, `1.0`, `10e-1`,
		`1e19`, `1.0e19`, `1e20`, `1e-19`, `1e-20`, `18446744073709551615`, `18446744073709551616`, `1844674407370955161.5`,
		`9999999999999999999`, `99999999999999999999`, `0.1234567890123456789`, `0.12345678901234567891`, `12.5E+3`,
		`-7.25e-3`, `1.8e308`, `5e-324`, `100`, `1E2`, `0.01e4`, `255`, `256`, `65536.0`, `3.0000000000000000001`}
	for i := range 2000 {
		nums = append(nums, fmt.Sprintf("%d.%0*de%d", i*7919%100003, i%7, i%1000, i%41-20))
	}
	for _, n := range nums {
		v := json.Number(n)
		if got, want := ratStream(newStream(), n), newStream().bytes(libraryStream(v)[1:]); got != want {
			t.Fatalf("%s: hash differs from that of the library's stream", n)
		}
	}
}
