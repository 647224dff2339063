package executor

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The cost of "uniqueItems", which the step meter does not see.
//
// The library checks uniqueItems within one evaluation of one schema object, in one step of
// the meter (duplicates, in its util.go): up to 20 items it compares every pair; past 20 it
// hashes each item and compares every pair of items that share a hash. The hash is of a byte
// stream that is ambiguous: a number writes its magnitude only (1 and -1 alike), a string its
// bytes with no length (["a","\u0004b"] and ["a\u0004b"] alike), a number's numerator and
// denominator with no length between them. A caller can therefore send thousands of distinct
// items that share one hash, and the library compares every pair of them, each comparison
// walking their common part (a number compared costs two big.Rat parses): 160 KB of arguments
// took 14 s of a core, 4 MB hours, far past the backstop and its grace, after which the
// definition was unusable for every caller. The hashing costs too: each item of an array of
// more than 20, everything inside it, once per such array it is in (a number parsed as big.Rat
// each time, 11 µs for 1e1000): 100 KB nesting such arrays 60 deep took 3.5 s with no
// comparison at all. costlyUniqueItems counts, before validating, what those comparisons and
// hashes cost the library for every array of the arguments (as if each were checked once), and
// arguments past maxUniqueItemsCost (maxUniqueHashesPerValue) are refused: only that call (a
// result past it is passed on unchecked). Where it can, the costing is rather done for each
// check the library makes, as it makes it (hookUniqueItems, below).

// maxUniqueItemsCost bounds the values the library's uniqueItems comparisons visit for one call
// (about a second, for numbers). Distinct items that share the library's hash are rare in real
// arguments (vectors differing in signs only: a few per hash), and an array of 20 items or
// fewer is compared pair by pair only as far as its items' common part.
const maxUniqueItemsCost = 1 << 20

// maxUniqueHashesPerValue bounds, with maxUniqueItemsCost, what the library's hashing of items
// costs one call: it hashes every item of an array of more than 20, everything inside the item
// too, so a value nested in such arrays is hashed once per level (a number parsed as big.Rat
// each time). The bound grows with the arguments as the backstop does (a value hashed 8 times:
// about 2 s per MiB of small numbers), so that large arrays and matrices pass.
const maxUniqueHashesPerValue = 8

// mentionsUniqueItems reports whether the JSON schema text raw (valid: it compiled) has a member
// "uniqueItems": true anywhere (only then are the arguments' arrays costed; false, which
// schema generators write by default, asserts nothing). The text rather than
// the compiled schema: a $dynamicRef may reach, while validating, a schema object no static
// edge leads to; a member of that name that is no keyword only costs the costing.
func mentionsUniqueItems(raw []byte) bool {
	if len(bytes.TrimSpace(raw)) == 0 { // (any object)
		return false
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return true
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "uniqueItems" && e == true || walk(e) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		}
		return false
	}
	return walk(doc)
}

// costlyUniqueItems finds the first array of the decoded arguments v past which the library's
// uniqueItems comparisons (see above) would have cost more than limit, and returns its location
// (JSON pointer tokens).
func costlyUniqueItems(v any, limit int) ([]string, bool) {
	u := uniqueCoster{left: limit, hashLeft: limit + maxUniqueHashesPerValue*countJSONValues(v)}
	u.node(v)
	return u.at, u.over
}

// uniqueCoster walks the arguments once, bottom up, computing for every value the hash of the
// byte stream the library hashes it by (streamHash), and costing each array's comparisons from
// its items' hashes.
type uniqueCoster struct {
	left int // what is left of the budget of comparisons
	// hashLeft is what is left of the budget of hashing (maxUniqueHashesPerValue)
	hashLeft int
	path     []pathStep // the location being walked
	at       []string   // the array that exhausted the budget
	over     bool
	// shallow: only the array the walk starts from is costed (costUniqueItems), not those
	// inside its items.
	shallow bool
}

// pathStep is one step of a location: a member's name, or else an array's index (its token
// is made only for the location returned).
type pathStep struct {
	name  string
	index int // -1 for a member
}

func tokens(path []pathStep) []string {
	out := make([]string, len(path))
	for i, p := range path {
		out[i] = p.name
		if p.index >= 0 {
			out[i] = strconv.Itoa(p.index)
		}
	}
	return out
}

// uniqueItem is what the coster knows of one value: the hash of its stream, and what hashing
// it costs the library (a step per value, numbers weighted as in equalCost).
type uniqueItem struct {
	v        any
	stream   streamHash
	hashCost int
}

// node returns the stream hash of v and what hashing it costs, costing the arrays inside it;
// once over the budget it stops walking (any answer will do).
func (u *uniqueCoster) node(v any) (streamHash, int) {
	if u.over {
		return streamHash{}, 0
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // (as writeHash does)
		h, cost := newStream().byte(0), 1
		for _, k := range keys {
			u.path = append(u.path, pathStep{name: k, index: -1})
			e, c := u.node(v[k])
			h, cost = h.cat(newStream().byte(4).str(k)).cat(e), cost+1+c
			u.path = u.path[:len(u.path)-1]
		}
		return h, cost
	case []any:
		items := make([]uniqueItem, len(v))
		h, cost := newStream().byte(1), 1
		for i, e := range v {
			u.path = append(u.path, pathStep{index: i})
			s, c := u.node(e)
			items[i] = uniqueItem{v: e, stream: s, hashCost: c}
			u.path = u.path[:len(u.path)-1]
			h, cost = h.cat(s), cost+c
		}
		if !u.over && !u.shallow {
			u.array(items)
		}
		return h, cost
	case nil:
		return newStream().byte(2), 1
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return newStream().byte(3).byte(b), 1
	case string:
		return newStream().byte(4).str(v), 1
	case json.Number:
		return ratStream(newStream().byte(5), string(v)), 1 + numberWeight(string(v))
	}
	return streamHash{}, 1
}

// array costs the library's duplicates(items), mirroring its order: every pair up to 20 items,
// else each item against the earlier ones that share its hash; it stops at the first
// duplicate, as the library does.
func (u *uniqueCoster) array(items []uniqueItem) {
	charge := func(a, b any) (equal bool) {
		cost, equal := equalCost(a, b, u.left+1)
		if u.left -= cost; u.left < 0 {
			u.over, u.at = true, tokens(u.path)
		}
		return equal
	}
	if len(items) <= 20 {
		for i := 1; i < len(items); i++ {
			for j := 0; j < i; j++ {
				if charge(items[i].v, items[j].v) || u.over {
					return
				}
			}
		}
		return
	}
	byHash := map[streamHash][]int{}
	for i, it := range items {
		if u.hashLeft -= it.hashCost; u.hashLeft < 0 {
			u.over, u.at = true, tokens(u.path)
			return
		}
		for _, j := range byHash[it.stream] {
			if charge(it.v, items[j].v) || u.over {
				return
			}
		}
		byHash[it.stream] = append(byHash[it.stream], i)
	}
}

// equalCost compares a and b as the library's equals does, and returns an upper bound of what
// that costs it (the values it visits, a number weighted by numberWeight, as parsing it is
// what costs), at most about limit, and whether they are equal. An object's members are visited in
// an order of Go's map, so every member is counted, as if the unequal one came last.
func equalCost(a, b any, limit int) (cost int, equal bool) {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return 1, false
		}
		cost, equal = 1, true
		for k, x := range a {
			y, ok := b[k]
			if !ok {
				cost++
				equal = false
				continue
			}
			c, eq := equalCost(x, y, limit-cost)
			cost += c
			equal = equal && eq
			if cost > limit {
				return cost, false
			}
		}
		return cost, equal
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return 1, false
		}
		cost = 1
		for i := range a {
			c, eq := equalCost(a[i], b[i], limit-cost)
			if cost += c; !eq || cost > limit {
				return cost, false
			}
		}
		return cost, true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return 1, false
		}
		return 1 + numberWeight(string(a)) + numberWeight(string(b)), sameDecimal(string(a), string(b))
	case string:
		b, ok := b.(string)
		return 1, ok && a == b
	case bool:
		b, ok := b.(bool)
		return 1, ok && a == b
	case nil:
		return 1, b == nil
	}
	return 1, false
}

// numberWeight is what parsing the JSON number n as big.Rat costs beyond a short number's (one
// unit, about half a microsecond): it grows with its length (a thousand digits: 8 to 30 µs) and
// with its exponent as much (1e1000, 6 bytes: 11 µs, 10^1000 computed), bounded by hugeNumber.
func numberWeight(n string) int {
	w := len(n) / 8
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		exp, _ := strconv.Atoi(strings.TrimLeft(n[i+1:], "+-")) // (bounded: see hugeNumber)
		w += exp / 16
	}
	return w
}

// sameDecimal compares two JSON numbers as exact decimal values, from their text (cheaply: no
// big.Rat), as the library's equals does with big.Rat.
func sameDecimal(a, b string) bool {
	if a == b {
		return true
	}
	za, da, ea := decimalParts(a)
	zb, db, eb := decimalParts(b)
	return za == zb && da == db && ea == eb
}

// decimalParts reads the JSON number s as sign × digits × 10^exp with digits free of leading
// and trailing zeros ("" for zero, whose sign is +).
func decimalParts(s string) (negative bool, digits string, exp int) {
	negative = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")) // (bounded: see hugeNumber)
		s = s[:i]
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		exp -= len(s) - i - 1
		s = s[:i] + s[i+1:]
	}
	s = strings.TrimLeft(s, "0")
	trimmed := strings.TrimRight(s, "0")
	exp += len(s) - len(trimmed)
	if trimmed == "" {
		return false, "", 0
	}
	return negative, trimmed, exp
}

// ratStream is s followed by what the library's hash writes of the JSON number n: the
// big-endian bytes of its numerator's magnitude and of its denominator, as a reduced fraction
// (smallRat, without big.Rat, for most numbers).
func ratStream(s streamHash, n string) streamHash {
	if num, den, ok := smallRat(n); ok {
		return s.uint(num).uint(den)
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return s
	}
	return s.bytes(r.Num().Bytes()).bytes(r.Denom().Bytes())
}

// smallRat is the JSON number n as a reduced fraction num/den of its magnitude, if both fit
// 64 bits and n has at most 19 significant digits and an exponent within ±19 (most numbers:
// big.Rat, which the others take, costs the costing as much as the validation).
func smallRat(n string) (num, den uint64, ok bool) {
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
		if err != nil || e < -19 || e > 19 {
			return 0, 0, false
		}
		mant, exp = n[:i], e
	}
	digits := 0
	for i := 0; i < len(mant); i++ {
		c := mant[i]
		if c == '.' {
			exp -= len(mant) - i - 1
			continue
		}
		if num == 0 && c == '0' {
			continue
		}
		if digits++; digits > 19 {
			return 0, 0, false
		}
		num = num*10 + uint64(c-'0')
	}
	switch {
	case num == 0:
		return 0, 1, true
	case exp >= 0:
		for ; exp > 0; exp-- {
			hi, lo := bits.Mul64(num, 10)
			if hi != 0 {
				return 0, 0, false
			}
			num = lo
		}
		return num, 1, true
	case exp < -19:
		return 0, 0, false
	}
	den = 1
	for ; exp < 0; exp++ {
		den *= 10
	}
	a, b := num, den // (gcd)
	for b != 0 {
		a, b = b, a%b
	}
	return num / a, den / a, true
}

// streamHash is a polynomial hash, modulo the prime 2^61-1 with a base chosen at random per
// process, of a byte stream, with base^length: the hash of two streams one after the other
// follows from theirs (cat), so every value's is computed once, from its children's. Equal
// streams hash alike; distinct ones collide with a negligible chance (which would only cost
// more, never less).
type streamHash struct{ h, pow uint64 }

const streamPrime = 1<<61 - 1

var streamBase = maphash.Bytes(maphash.MakeSeed(), nil)%(streamPrime-256) + 256

func newStream() streamHash { return streamHash{h: 0, pow: 1} }

func mulMod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// (hi·2^64 + lo) mod 2^61-1, with 2^64 ≡ 2^3
	r := (hi<<3 | lo>>61) + lo&streamPrime
	for r >= streamPrime {
		r -= streamPrime
	}
	return r
}

func (s streamHash) byte(c byte) streamHash {
	h := mulMod(s.h, streamBase) + uint64(c)
	if h >= streamPrime {
		h -= streamPrime
	}
	return streamHash{h: h, pow: mulMod(s.pow, streamBase)}
}

func (s streamHash) str(t string) streamHash {
	for i := 0; i < len(t); i++ {
		s = s.byte(t[i])
	}
	return s
}

// uint is s followed by the big-endian bytes of m, as big.Int.Bytes writes them (none for 0).
func (s streamHash) uint(m uint64) streamHash {
	for shift := (bits.Len64(m) + 7) / 8 * 8; shift > 0; shift -= 8 {
		s = s.byte(byte(m >> (shift - 8)))
	}
	return s
}

func (s streamHash) bytes(b []byte) streamHash {
	for _, c := range b {
		s = s.byte(c)
	}
	return s
}

// cat is the hash of s's stream followed by t's.
func (s streamHash) cat(t streamHash) streamHash {
	h := mulMod(s.h, t.pow) + t.h
	if h >= streamPrime {
		h -= streamPrime
	}
	return streamHash{h: h, pow: mulMod(s.pow, t.pow)}
}

// The check as the library makes it.
//
// Costing every array of the arguments refused calls for arrays no uniqueItems applies to (a
// schema with "tags": uniqueItems, and 1,024 sign-quantized embeddings of ±0.125 elsewhere in
// the arguments: refused). So where it can, a compiled copy costs each array when the library
// is about to check it: the library evaluates a schema object's "format" before its array
// keywords and after the keywords whose failure skips them (type, const, enum), so every schema
// object with uniqueItems gets a format (wrapping its own) that costs the array against the
// validation's budget (meteredSchema.uniqueLeft, hashLeft), stopping the validation past it.
// Each check is costed, so one array checked many times (allOf of copies) is too. Where the
// compiled schema objects cannot all be reached (a $dynamicRef or $recursiveRef may resolve to
// one no field leads to; a "format": "regex", which the library checks without its Format),
// every array is costed beforehand instead (costlyUniqueItems).

// hookUniqueItems gives every schema object of root with uniqueItems the format that costs its
// check on m, and reports whether it could (see above); if not, it changes nothing.
func hookUniqueItems(root *jsonschema.Schema, m *meteredSchema) bool {
	var found []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	complete := true
	var visit func(s *jsonschema.Schema)
	visitAny := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			visit(v)
		case []*jsonschema.Schema:
			for _, e := range v {
				visit(e)
			}
		}
	}
	visit = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			complete = false
		}
		if s.UniqueItems {
			if s.Format != nil && s.Format.Name == "regex" {
				complete = false
			}
			found = append(found, s)
		}
		for _, e := range []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
			s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
			visit(e)
		}
		for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
			for _, e := range l {
				visit(e)
			}
		}
		for _, e := range s.Properties {
			visit(e)
		}
		for _, e := range s.PatternProperties {
			visit(e)
		}
		for _, e := range s.DependentSchemas {
			visit(e)
		}
		for _, e := range s.Dependencies {
			visitAny(e)
		}
		visitAny(s.AdditionalProperties)
		visitAny(s.Items)
		visitAny(s.AdditionalItems)
	}
	visit(root)
	if !complete {
		return false
	}
	for _, s := range found {
		own := s.Format
		name := "uniqueItems"
		if own != nil {
			name = own.Name
		}
		s.Format = &jsonschema.Format{Name: name, Validate: func(v any) error {
			if own != nil {
				if err := own.Validate(v); err != nil {
					return err // (then the library checks no uniqueItems)
				}
			}
			if arr, ok := v.([]any); ok && len(arr) > 1 {
				m.costUniqueItems(arr)
			}
			return nil
		}}
	}
	return true
}

// costUniqueItems costs the library's check of arr against the validation's budget, and stops
// the validation past it (stopValidation.uniqueAt).
func (m *meteredSchema) costUniqueItems(arr []any) {
	u := uniqueCoster{left: m.uniqueLeft, hashLeft: m.hashLeft, shallow: true}
	items := make([]uniqueItem, len(arr))
	for i, e := range arr {
		s, c := u.node(e)
		items[i] = uniqueItem{v: e, stream: s, hashCost: c}
	}
	u.array(items)
	m.uniqueLeft, m.hashLeft = u.left, u.hashLeft
	if u.over {
		panic(stopValidation{uniqueAt: &arr[0]})
	}
}

// arrayAt is the location (JSON pointer tokens) in v of the array whose first item is at first.
func arrayAt(v any, first *any) ([]string, bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if at, ok := arrayAt(e, first); ok {
				return append([]string{k}, at...), true
			}
		}
	case []any:
		if len(v) > 0 && &v[0] == first {
			return nil, true
		}
		for i, e := range v {
			if at, ok := arrayAt(e, first); ok {
				return append([]string{strconv.Itoa(i)}, at...), true
			}
		}
	}
	return nil, false
}
