package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
)

// Placeholder replaces a secret value.
const Placeholder = "[redacted]"

// MinLen is the shortest value that is redacted.
const MinLen = 3

// Values redacts a set of secret values. The zero value redacts nothing.
type Values struct {
	r *strings.Replacer // nil: no values
	// text replaces every form (see forms), for JSON text that cannot be decoded.
	text *strings.Replacer
	// forms are the byte sequences that reveal a value in JSON text: as is, and as JSON
	// escapes it (with and without HTML escaping).
	forms [][]byte
	// vals and textForms are the strings r and text replace, longest first: String and Text
	// replace every occurrence, overlapping ones together (see replace).
	vals, textForms []string
	// escRunes are the characters of the values that another JSON encoder may spell with a
	// \u escape encoding/json does not write (non-ASCII, control, '<', '>', '&': "\u00E4",
	// "\u003C"); astral says a value holds a character beyond U+FFFF (a surrogate pair).
	escRunes map[rune]bool
	astral   bool
}

// New returns the redactor of values (duplicates and values shorter than MinLen are dropped;
// longer values are replaced first, so one that contains another goes whole).
func New(values ...string) Values {
	seen := map[string]bool{}
	var vals []string
	for _, v := range values {
		if len(v) >= MinLen && !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return Values{}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, Placeholder)
	}
	out := Values{r: strings.NewReplacer(pairs...), vals: vals}
	for _, v := range vals {
		for _, c := range v {
			switch {
			case c > 0xFFFF:
				out.astral = true
			case c >= 0x80 || c < 0x20 || c == '<' || c == '>' || c == '&':
				if out.escRunes == nil {
					out.escRunes = map[rune]bool{}
				}
				out.escRunes[c] = true
			}
		}
		out.forms = append(out.forms, []byte(v))
		for _, esc := range escapedForms(v) {
			if !bytes.Equal(esc, []byte(v)) {
				out.forms = append(out.forms, esc)
			}
		}
	}
	forms := make([]string, 0, len(out.forms))
	for _, f := range out.forms {
		forms = append(forms, string(f))
	}
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	out.textForms = forms
	pairs = pairs[:0]
	for _, f := range forms {
		pairs = append(pairs, f, Placeholder)
	}
	out.text = strings.NewReplacer(pairs...)
	return out
}

// Text returns s, text that may be JSON or a piece of it, with every value replaced as is and
// in the spellings encoding/json gives it in a string (see In): for text that cannot be decoded
// and walked (JSON cut short, not JSON at all). A value spelled with other escapes is not found
// by it: check EscapesASCII.
func (v Values) Text(s string) string {
	if v.text == nil {
		return s
	}
	return replace(s, v.text, v.textForms)
}

// replace returns s with every occurrence of olds replaced by Placeholder. Occurrences that
// overlap (the end of one value is the start of another) go together under one Placeholder:
// strings.Replacer, which replaces the first match it finds and goes on after it, would leave
// the rest of the other value in the text. r (a Replacer of olds) finds the common case, no
// value at all, quickly.
func replace(s string, r *strings.Replacer, olds []string) string {
	if r.Replace(s) == s {
		return s
	}
	type span struct{ i, j int }
	var spans []span
	for _, o := range olds {
		for off := 0; off < len(s); {
			k := strings.Index(s[off:], o)
			if k < 0 {
				break
			}
			spans = append(spans, span{off + k, off + k + len(o)})
			off += k + 1
		}
	}
	sort.Slice(spans, func(a, b int) bool {
		return spans[a].i < spans[b].i || spans[a].i == spans[b].i && spans[a].j > spans[b].j
	})
	var b strings.Builder
	b.Grow(len(s))
	at := 0 // s[:at] is written
	for n := 0; n < len(spans); {
		i, j := spans[n].i, spans[n].j
		for n++; n < len(spans) && spans[n].i < j; n++ {
			j = max(j, spans[n].j)
		}
		b.WriteString(s[at:i])
		b.WriteString(Placeholder)
		at = j
	}
	b.WriteString(s[at:])
	return b.String()
}

// escapedForms returns v as JSON string content, escaped by encoding/json with and without
// HTML escaping.
func escapedForms(v string) [][]byte {
	var out [][]byte
	if b, err := json.Marshal(v); err == nil {
		out = append(out, b[1:len(b)-1])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		b := bytes.TrimSpace(buf.Bytes())
		out = append(out, b[1:len(b)-1])
	}
	return out
}

// Empty reports whether there is nothing to redact.
func (v Values) Empty() bool { return v.r == nil }

// String returns s with every value replaced.
func (v Values) String(s string) string {
	if v.r == nil {
		return s
	}
	return replace(s, v.r, v.vals)
}

// Err returns an error's text redacted ("" for nil).
func (v Values) Err(err error) string {
	if err == nil {
		return ""
	}
	return v.String(err.Error())
}

// In reports whether raw (text or JSON text) may hold a value: as is, JSON-escaped as
// encoding/json escapes it, or possibly in another JSON spelling (an escape of a printable ASCII
// character that encoding/json does not write, such as \u0068 for h, or \/; or an escape of
// another character of a value, as other encoders write them: "\u00E4", "\u003C", a surrogate
// pair): such text is then checked decoded (see JSON). False means it holds none.
func (v Values) In(raw []byte) bool {
	if v.r == nil {
		return false
	}
	for _, f := range v.forms {
		if bytes.Contains(raw, f) {
			return true
		}
	}
	return EscapesASCII(raw) || v.escapesValueRune(raw)
}

// escapesValueRune reports whether JSON text holds a \u escape (in either case) of a character
// of a value that EscapesASCII does not look for, or half of a surrogate pair when a value has
// a character beyond U+FFFF.
func (v Values) escapesValueRune(raw []byte) bool {
	if v.escRunes == nil && !v.astral {
		return false
	}
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+4 > len(raw) {
			return true // a cut escape: not worth the risk
		}
		hi, ok1 := hexByte(raw[i], raw[i+1])
		lo, ok2 := hexByte(raw[i+2], raw[i+3])
		if !ok1 || !ok2 {
			continue
		}
		c := rune(hi)<<8 | rune(lo)
		if c >= 0xD800 && c <= 0xDFFF && v.astral || v.escRunes[c] {
			return true
		}
	}
}

// EscapesASCII reports whether JSON text spells a printable ASCII character with an escape
// that encoding/json does not write: \/, or \u00XX for a character other than <, > and &
// (which it escapes for HTML). Text that does may hide a value or a key name from a search
// of its bytes.
func EscapesASCII(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\/`)) {
		return true
	}
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u00`))
		if j < 0 {
			return false
		}
		i += j + 4
		if i+2 > len(raw) {
			return true // a cut escape: not worth the risk
		}
		c, ok := hexByte(raw[i], raw[i+1])
		if !ok {
			continue
		}
		if c >= 0x20 && c < 0x7f && c != '<' && c != '>' && c != '&' {
			return true
		}
	}
}

func hexByte(hi, lo byte) (byte, bool) {
	h, ok1 := hexDigit(hi)
	l, ok2 := hexDigit(lo)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// JSON returns raw (a JSON document) with every value in its strings and keys replaced; raw
// itself, unchanged, when it holds none (the common case, checked without decoding). changed
// reports a replacement: the document is then re-encoded (the same values; object keys sorted,
// numbers spelled as they were). Text that is not JSON is redacted as text.
func (v Values) JSON(raw []byte) (out []byte, changed bool) {
	if !v.In(raw) {
		return raw, false
	}
	doc, err := Decode(raw)
	if err != nil {
		// As Text: the value in its escaped spellings too (JSON cut short, say).
		text := v.Text(string(raw))
		return []byte(text), text != string(raw)
	}
	replaced := false
	b, err := Encode(v.walk(doc, nil, &replaced))
	if err != nil {
		return []byte(v.Text(string(raw))), true
	}
	if !replaced {
		return raw, false // In said "may": decoded, it holds none
	}
	return b, true
}

// Walk returns doc (decoded by Decode) with every value replaced in its strings and keys, and,
// when sensitiveKey is not nil, the value of every key it matches (unless an object) replaced
// by Placeholder.
func (v Values) Walk(doc any, sensitiveKey func(string) bool) any {
	var replaced bool
	return v.walk(doc, sensitiveKey, &replaced)
}

// walk is Walk, setting *replaced when it replaced anything.
func (v Values) walk(doc any, sensitiveKey func(string) bool, replaced *bool) any {
	str := func(s string) string {
		r := v.String(s)
		if r != s {
			*replaced = true
		}
		return r
	}
	switch x := doc.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if sensitiveKey != nil && sensitiveKey(k) {
				if _, isObj := val.(map[string]any); !isObj {
					out[str(k)] = Placeholder
					*replaced = true
					continue
				}
			}
			out[str(k)] = v.walk(val, sensitiveKey, replaced)
		}
		return out
	case []any:
		for i := range x {
			x[i] = v.walk(x[i], sensitiveKey, replaced)
		}
		return x
	case string:
		return str(x)
	case json.Number:
		// A value made of digits may be spelled as a number: the number goes whole.
		if str(string(x)) != string(x) {
			return Placeholder
		}
	}
	return doc
}

// errTrailing is Decode's error for text after the document.
var errTrailing = errors.New("redact: text after the JSON document")

// Decode decodes one JSON document keeping numbers as written (json.Number). Text after the
// document (but white space) is an error: it would be neither decoded nor redacted.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return doc, nil
}

// Encode encodes doc without HTML escaping and without a trailing newline.
func Encode(doc any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
