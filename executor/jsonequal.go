package executor

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/jsonscan"
)

// sameJSON reports whether the JSON texts a and b hold the same value: an object's members as
// a set (any order), an array's elements in order, numbers as exact decimal values (1, 1.0,
// 1e0 and 10e-1 alike, 9007199254740993 not 9007199254740992; -0 is 0), strings as the text
// their escapes spell ("\u0041" is "A"), and whitespace between tokens aside. A number is
// never a string ("1" is not 1).
//
// Conservative, for deciding that two requests ask for the same call: text whose value is not
// one is never the same as anything, itself included — not JSON, a member named twice in one
// object (readers take different values of it, see duplicateMember), nesting deeper than
// maxArgumentDepth (refused before approval anyway; it bounds the work). And where decoding
// would lose what a reader sees, only the same text is the same: a string that is not Unicode
// text (a lone surrogate escape, bytes that are not UTF-8: decoded, all read U+FFFD), a number
// beyond what is computed with exactly (hugeNumber).
func sameJSON(a, b []byte) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	for _, v := range [][]byte{a, b} {
		if !json.Valid(v) || nestsDeeper(v, maxArgumentDepth) {
			return false
		}
		if _, dup := duplicateMember(v); dup {
			return false
		}
	}
	return sameValue(a, b)
}

// sameValue compares the JSON values a and b (valid, with no space around them, no member
// named twice).
func sameValue(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	switch a[0] {
	case '{':
		if b[0] != '{' {
			return false
		}
		members := map[string][]byte{}
		if !jsonscan.Members(a, func(name, value []byte) { members[stringKey(name)] = value }) {
			return false
		}
		same, n := true, 0
		if !jsonscan.Members(b, func(name, value []byte) {
			n++
			if same {
				v, ok := members[stringKey(name)]
				same = ok && sameValue(v, value)
			}
		}) {
			return false
		}
		return same && n == len(members)
	case '[':
		if b[0] != '[' {
			return false
		}
		var elems [][]byte
		if !jsonscan.Elements(a, func(value []byte) { elems = append(elems, value) }) {
			return false
		}
		same, i := true, 0
		if !jsonscan.Elements(b, func(value []byte) {
			if same {
				same = i < len(elems) && sameValue(elems[i], value)
			}
			i++
		}) {
			return false
		}
		return same && i == len(elems)
	case '"':
		return b[0] == '"' && stringKey(a) == stringKey(b)
	case 't', 'f', 'n':
		return bytes.Equal(a, b)
	default:
		return (b[0] == '-' || '0' <= b[0] && b[0] <= '9') && sameNumber(a, b)
	}
}

// sameNumber compares the JSON numbers a and b as exact decimal values; numbers beyond what is
// computed with exactly (hugeNumber: the cost of big.Rat grows with the exponent) only as text.
func sameNumber(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if hugeNumber(string(a)) || hugeNumber(string(b)) {
		return false
	}
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	return okx && oky && x.Cmp(y) == 0
}

// stringKey is what the JSON string raw (quoted, valid JSON) reads as: its text, escapes
// decoded. A string that is not Unicode text (a lone surrogate escape, bytes that are not
// UTF-8) has a key of its own, never the key of another text: its raw bytes after a byte 0xff,
// which no UTF-8 text holds.
func stringKey(raw []byte) string {
	if len(raw) < 2 {
		return "\xff" + string(raw)
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	if s, ok := unescape(body); ok {
		return s
	}
	return "\xff" + string(raw)
}

// unescape decodes the body of a JSON string (between its quotes); false when it is not
// Unicode text.
func unescape(body []byte) (string, bool) {
	var sb strings.Builder
	sb.Grow(len(body))
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(body) {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i:i+4]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			sb.Write(body[i : i+size])
			i += size
			continue
		}
		if i+1 >= len(body) {
			return "", false
		}
		switch e := body[i+1]; e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := hex4(i + 2)
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by the escape of a low one is a character.
				if i+2 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
					return "", false
				}
				lo, ok := hex4(i + 2)
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			sb.WriteRune(r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return sb.String(), true
}
