package executor

import (
	"encoding/json"
	"math/big"
	"slices"
	"testing"
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
		got := u.node(v)
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
