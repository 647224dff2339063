package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Numbers the validator computes with.
//
// The library compares numbers exactly, as math/big.Rat ("type": "integer", the numeric bounds,
// multipleOf, enum, const, uniqueItems; and the meta-schema's "type": "integer" of minLength and
// the like when compiling), parsing a number's text again for each comparison. The cost grows
// with the number's exponent and digits (1e999999, 9 bytes: tens of milliseconds, 5^999999
// computed; a million digits: seconds, the parse being quadratic) and takes no step of the
// meter: 200 "maxLength": 1e999999 in a schema held a worker compiling for 46 s, and a caller's
// few such numbers in arguments held a core past the backstop and its grace, disabling a
// harmless definition for everyone. A number longer than maxNumberBytes or whose exponent is
// beyond ±maxNumberExponent is therefore refused before the library sees it: in a schema
// (invalid_schema), in arguments (invalid_arguments at the number), in a structuredContent
// (passed on unchecked). No real schema or call needs more: float64 reaches 1.8e308, and
// exact integers such as 12345678901234567890 or a uint256 (78 digits) are far within.
const (
	maxNumberBytes    = 1000
	maxNumberExponent = 1000
)

// hugeNumberText is why a number is refused, for messages.
var hugeNumberText = fmt.Sprintf("more than %d characters or an exponent beyond ±%d, more than the validator computes with exactly", maxNumberBytes, maxNumberExponent)

// hugeNumber reports whether the JSON number text s is beyond the bounds (see above).
func hugeNumber(s string) bool {
	if len(s) > maxNumberBytes {
		return true
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return false
	}
	exp := strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")
	if exp == "" {
		return false
	}
	n, err := strconv.Atoi(exp)
	return err != nil || n > maxNumberExponent
}

// firstHugeNumber finds, in the JSON text raw (scanned from its bytes, as jsonShape does), the
// first number beyond the bounds, and returns its text. Text that is not JSON gets some answer.
func firstHugeNumber(raw []byte) (string, bool) {
	inString := false
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
		switch {
		case c == '"':
			inString = true
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("0123456789.eE+-", raw[j]) >= 0 {
				j++
			}
			// (no string made of a number without an exponent within the length: the common
			// case, checked for every call's arguments)
			if num := raw[i:j]; len(num) > maxNumberBytes || bytes.IndexAny(num, "eE") >= 0 && hugeNumber(string(num)) {
				return string(num), true
			}
			i = j - 1
		}
	}
	return "", false
}

// hugeNumberAt is the location (JSON pointer tokens) in the decoded value v of its first number
// beyond the bounds, members visited in the order of their names, and whether there is one.
func hugeNumberAt(v any) ([]string, bool) {
	switch v := v.(type) {
	case json.Number:
		return nil, hugeNumber(string(v))
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if at, ok := hugeNumberAt(v[k]); ok {
				return append([]string{k}, at...), true
			}
		}
	case []any:
		for i, e := range v {
			if at, ok := hugeNumberAt(e); ok {
				return append([]string{strconv.Itoa(i)}, at...), true
			}
		}
	}
	return nil, false
}
