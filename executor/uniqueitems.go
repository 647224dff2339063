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
// definition was unusable for every caller. costlyUniqueItems counts, before validating, what
// those comparisons cost the library for every array of the arguments (as if each were checked
// once), and arguments past maxUniqueItemsCost are refused: only that call (a result past it
// is passed on unchecked). Residual: a schema that applies uniqueItems to one array many
// times (allOf of copies) multiplies that cost; the server chose that.

// maxUniqueItemsCost bounds the values the library's uniqueItems comparisons visit for one call
// (about a second, for numbers). Distinct items that share the library's hash are rare in real
// arguments (vectors differing in signs only: a few per hash), and an array of 20 items or
// fewer is compared pair by pair only as far as its items' common part.
const maxUniqueItemsCost = 1 << 20

// mentionsUniqueItems reports whether the JSON schema text raw (valid: it compiled) has a member
// named uniqueItems anywhere (only then are the arguments' arrays costed). The text rather than
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
				if k == "uniqueItems" || walk(e) {
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
	u := uniqueCoster{left: limit}
	u.node(v)
	return u.at, u.over
}

// uniqueCoster walks the arguments once, bottom up, computing for every value the hash of the
// byte stream the library hashes it by (streamHash), and costing each array's comparisons from
// its items' hashes.
type uniqueCoster struct {
	left int        // what is left of the budget
	path []pathStep // the location being walked
	at   []string   // the array that exhausted the budget
	over bool
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

// uniqueItem is what the coster knows of one value: the hash of its stream.
type uniqueItem struct {
	v      any
	stream streamHash
}

// node returns the stream hash of v, costing the arrays inside it; once over the budget it
// stops walking (any answer will do).
func (u *uniqueCoster) node(v any) streamHash {
	if u.over {
		return streamHash{}
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // (as writeHash does)
		h := newStream().byte(0)
		for _, k := range keys {
			u.path = append(u.path, pathStep{name: k, index: -1})
			h = h.cat(newStream().byte(4).str(k)).cat(u.node(v[k]))
			u.path = u.path[:len(u.path)-1]
		}
		return h
	case []any:
		items := make([]uniqueItem, len(v))
		h := newStream().byte(1)
		for i, e := range v {
			u.path = append(u.path, pathStep{index: i})
			items[i] = uniqueItem{v: e, stream: u.node(e)}
			u.path = u.path[:len(u.path)-1]
			h = h.cat(items[i].stream)
		}
		if !u.over {
			u.array(items)
		}
		return h
	case nil:
		return newStream().byte(2)
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return newStream().byte(3).byte(b)
	case string:
		return newStream().byte(4).str(v)
	case json.Number:
		return ratStream(newStream().byte(5), string(v))
	}
	return streamHash{}
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
		for _, j := range byHash[it.stream] {
			if charge(it.v, items[j].v) || u.over {
				return
			}
		}
		byHash[it.stream] = append(byHash[it.stream], i)
	}
}

// equalCost compares a and b as the library's equals does, and returns an upper bound of what
// that costs it (the values it visits, a number weighted by its length, as parsing it is what
// costs), at most about limit, and whether they are equal. An object's members are visited in
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
		return 1 + (len(a)+len(b))/8, ok && sameDecimal(string(a), string(b))
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
// (an integer that fits 64 bits is written without big.Rat, as most are).
func ratStream(s streamHash, n string) streamHash {
	if !strings.ContainsAny(n, ".eE") {
		if m, err := strconv.ParseUint(strings.TrimPrefix(n, "-"), 10, 64); err == nil {
			for shift := (bits.Len64(m) + 7) / 8 * 8; shift > 0; shift -= 8 {
				s = s.byte(byte(m >> (shift - 8)))
			}
			return s.byte(1)
		}
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return s
	}
	return s.bytes(r.Num().Bytes()).bytes(r.Denom().Bytes())
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
