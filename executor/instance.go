package executor

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeInstance decodes JSON text for validation exactly as jsonschema.UnmarshalJSON does
// (encoding/json with UseNumber: objects map[string]any, the last of a name twice winning,
// arrays []any, numbers json.Number, strings as encoding/json unquotes them), in one pass over
// the text. jsonschema.UnmarshalJSON streams through a json.Decoder, which scans every value
// twice and copies the text: ~10 µs of every call's arguments and result. Text the one pass
// does not take (anything that is not well-formed JSON, or nests deeper than
// maxInstanceDepth) goes to jsonschema.UnmarshalJSON, for the same value or the same error
// (TestDecodeInstanceMatches, FuzzDecodeInstance).
func decodeInstance(text []byte) (any, error) {
	d := instanceDecoder{b: text}
	v, ok := d.value(0)
	if ok {
		d.space()
		if d.i == len(d.b) {
			return v, nil
		}
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(text))
}

// maxInstanceDepth bounds the recursion of decodeInstance (the callers bound nesting lower).
const maxInstanceDepth = 512

type instanceDecoder struct {
	b []byte
	i int
}

func (d *instanceDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value decodes the value at d.i (after white space); false for anything not well-formed.
// sep reads what follows a member or an element: a comma (end false: more follow) or close,
// the object's or array's end (end true); ok false for anything else.
func (d *instanceDecoder) sep(close byte) (end, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return false, true
	case close:
		d.i++
		return true, true
	}
	return false, false
}

func (d *instanceDecoder) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.b) || depth > maxInstanceDepth {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		obj := map[string]any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return obj, true
		}
		for {
			d.space()
			key, ok := d.str()
			if !ok {
				return nil, false
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, false
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			obj[key] = v
			if end, ok := d.sep('}'); !ok {
				return nil, false
			} else if end {
				return obj, true
			}
		}
	case c == '[':
		d.i++
		arr := []any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return arr, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			arr = append(arr, v)
			if end, ok := d.sep(']'); !ok {
				return nil, false
			} else if end {
				return arr, true
			}
		}
	case c == '"':
		return d.str()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *instanceDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

// str decodes the string at d.i: as it is when it holds no escape and is valid UTF-8 (what
// encoding/json keeps as it is), else by encoding/json.
func (d *instanceDecoder) str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i
	plain := true
	for j := start + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			if plain {
				s := d.b[start+1 : j]
				if utf8.Valid(s) {
					return string(s), true
				}
			}
			var s string
			if json.Unmarshal(d.b[start:j+1], &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			j++ // the escaped byte (checked by encoding/json)
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// number decodes the number at d.i (JSON's grammar) as a json.Number.
func (d *instanceDecoder) number() (any, bool) {
	b, i := d.b, d.i
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		digits()
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	n := json.Number(b[d.i:i])
	d.i = i
	return n, true
}
