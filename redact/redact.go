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
	// m finds every form of every value (see forms.go): as is, as JSON escapes it, in base64,
	// percent-escaped with a space as '+', in the other letter case of a hex value.
	m *matcher // nil: no values
	// escRunes are the characters of the values that another JSON encoder may spell with a
	// \u escape encoding/json does not write (non-ASCII, control, DEL, '<', '>', '&': "\u00E4",
	// "\u003C", "\u007f" as Python's json writes DEL); astral says a value holds a character
	// beyond U+FFFF (a surrogate pair).
	escRunes map[rune]bool
	astral   bool
	// numeric says a value is made of digits (with perhaps a sign or a decimal point): JSON may
	// spell it as a number in exponent form (see Number).
	numeric bool
	// maxLen is the length of the longest value.
	maxLen int
	// inPlaceholder says Placeholder holds a form of a value.
	inPlaceholder bool
}

// New returns the redactor of values (duplicates and values shorter than MinLen are dropped;
// a value found inside another, or overlapping it, goes with it under one Placeholder).
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
	var out Values
	var all []string
	for _, v := range vals {
		out.maxLen = max(out.maxLen, len(v))
		if numericValue(v) {
			out.numeric = true
		}
		for _, c := range v {
			switch {
			case c > 0xFFFF:
				out.astral = true
			case c >= 0x7f || c < 0x20 || c == '<' || c == '>' || c == '&':
				if out.escRunes == nil {
					out.escRunes = map[rune]bool{}
				}
				out.escRunes[c] = true
			}
		}
		all = append(all, forms(v)...)
	}
	out.m = newMatcher(all)
	out.inPlaceholder = out.m.contains([]byte(Placeholder))
	return out
}

// Text returns s, text that may be JSON or a piece of it, with every value replaced: as String
// does (which also finds the spellings encoding/json gives a value in a string, and values
// spelled with other JSON escapes or percent escapes). It is String, kept for the callers that
// redact JSON text that cannot be decoded (JSON cut short, not JSON at all).
func (v Values) Text(s string) string { return v.String(s) }

// span is s[i:j], to be replaced.
type span struct{ i, j int }

// replaceSpans returns s with every span replaced by Placeholder. Spans that overlap (the end of
// one value is the start of another) go together under one Placeholder: no part of either value
// is left in the text.
func replaceSpans(s string, spans []span) string {
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
func (v Values) Empty() bool { return v.m == nil }

// String returns s with every value replaced: as is, in the spellings encoding/json gives it
// in a JSON string, in base64 (standard or URL alphabet, padded or not, also inside a longer
// base64 text whatever its alignment there), percent-escaped (any of its bytes, in either case
// of hex digit), with JSON escapes of some of its characters ("hunt\u0065r22"), and, for a
// value made of hex digits, in either letter case.
func (v Values) String(s string) string {
	if v.m == nil {
		return s
	}
	spans, decs := findSpansView(v.m, s)
	if spans == nil {
		return s
	}
	return v.again(replaceSpans(s, spans), decs != nil)
}

// maxPasses bounds how many times again searches text redacted already.
const maxPasses = 3

// again returns out, text redacted once, searched again while that finds more, when the text
// held escapes: a value next to another may have made an escape with it ("…%" before "17…",
// "…\" before "n…") that hid the other when the text was decoded, and is gone once replaced.
// (Not when Placeholder itself holds a value: it would be found in every replacement.)
func (v Values) again(out string, escapes bool) string {
	if !escapes || v.inPlaceholder {
		return out
	}
	for range maxPasses - 1 {
		spans := findSpans(v.m, out)
		if spans == nil {
			break
		}
		out = replaceSpans(out, spans)
	}
	return out
}

// StringCut is String for text that may have been cut short before it was redacted, with mark
// where it was cut (a quote of a server's words cut to size, "…" appended, inside a longer
// message): a value that straddled a cut is no longer whole, and String cannot find it. The
// text before each mark that is the start of a form of a value (MinLen bytes or more of it, as
// String finds it whole: as is, JSON-escaped, in base64, spelled with percent or JSON escapes,
// an escape cut short by the cut too) is replaced too. Fewer bytes, at most
// MinLen-1 of a value, are left: as short a value is not redacted either.
func (v Values) StringCut(s, mark string) string {
	if v.m == nil {
		return s
	}
	spans, decs := findSpansView(v.m, s)
	if mark != "" {
		// Before a mark, the look back stops at the mark before it when no form holds the
		// mark (the start of a form cannot reach past it): each byte is looked at for one mark
		// at most, however many marks the text holds.
		crosses, known := false, false
		for from, floor := 0, 0; ; {
			i := strings.Index(s[from:], mark)
			if i < 0 {
				break
			}
			p := from + i
			if !known {
				crosses, known = v.m.holds(mark), true
			}
			if start := v.m.cutStart(s, p, floor, decs); start >= 0 {
				spans = addSpan(spans, span{start, p})
			}
			from = p + len(mark)
			if !crosses {
				floor = from
			}
		}
	}
	if spans == nil {
		return s
	}
	return v.again(replaceSpans(s, spans), decs != nil)
}

// PartialEnd returns where s ends with the start of a form of a value (MinLen bytes or more of
// it, not the whole form; as it is or spelled with escapes, perhaps followed by an escape cut
// short), else len(s): text cut there (by a read limit, a lost connection) holds part of the
// value, which String cannot find; s[:PartialEnd(s)] holds none.
func (v Values) PartialEnd(s string) int {
	if v.m == nil {
		return len(s)
	}
	view, idx := unescape(s, true)
	decs := decodings(s, view, idx)
	p := v.m.cutStart(s, len(s), 0, decs)
	if p < 0 {
		return len(s)
	}
	// A whole form that the start goes through goes too: cut inside it, its start would be
	// left, no longer whole ("said: %61bbab%62baT3", its end the start of another value:
	// String would not find "abbabbbaT3" in what is before the cut).
	// Forms that overlap go together (each start inside another, one after another: the
	// spans of one decoding do not overlap, those of two may, a chain the text long), in one
	// pass over the spans in order.
	spans := decodedSpans(v.m, s, decs)
	sort.Slice(spans, func(a, b int) bool { return spans[a].i < spans[b].i })
	for n := 0; n < len(spans); {
		i, j := spans[n].i, spans[n].j
		for n++; n < len(spans) && spans[n].i < j; n++ {
			j = max(j, spans[n].j)
		}
		if i < p && p < j {
			return i
		}
	}
	return p
}

// Err returns an error's text redacted ("" for nil).
func (v Values) Err(err error) string {
	if err == nil {
		return ""
	}
	return v.String(err.Error())
}

// In reports whether raw (text or JSON text) may hold a value: in any of the forms String
// finds, or possibly in another JSON spelling (an escape of a printable ASCII character that
// encoding/json does not write, such as \u0068 for h, or \/; or an escape of another character
// of a value, as other encoders write them: "\u00E4", "\u003C", a surrogate pair), or, for a
// value made of digits, as a JSON number in exponent form (8.675309e6): such text is then
// checked decoded (see JSON). False means it holds none.
func (v Values) In(raw []byte) bool {
	if v.m == nil {
		return false
	}
	if v.m.contains(raw) || EscapesASCII(raw) || v.escapesValueRune(raw) {
		return true
	}
	// Escapes other than percent escapes are covered above (the spellings encoding/json
	// writes are forms; the others make EscapesASCII or escapesValueRune true): the text is
	// decoded only when it holds a percent escape.
	if s := bytesString(raw); hasPercentEscape(s, strings.IndexByte(s, '%')) {
		if v.m.containsDecoded(s) {
			return true
		}
	}
	return v.numeric && v.numberIn(raw)
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
// by Placeholder. Keys that become one once redacted (they differ only in how a value is
// spelled in them) keep the member of the smallest original key: the same document always
// gives the same result.
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
		// Keys that differ only in a secret (or its spelling) are one key redacted: the member
		// of the smallest original key is kept, whatever the order the map is walked in.
		var from map[string]string // redacted key → the original key of its member
		for k, val := range x {
			var nv any
			if _, isObj := val.(map[string]any); sensitiveKey != nil && sensitiveKey(k) && !isObj {
				nv = Placeholder
				*replaced = true
			} else {
				nv = v.walk(val, sensitiveKey, replaced)
			}
			nk := str(k)
			if _, dup := out[nk]; dup {
				orig, ok := from[nk]
				if !ok {
					orig = nk
				}
				if orig < k {
					continue
				}
			}
			if nk != k {
				if from == nil {
					from = map[string]string{}
				}
				from[nk] = k
			} else if from != nil {
				delete(from, nk)
			}
			out[nk] = nv
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
		if v.Number(string(x)) {
			*replaced = true
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
