package redact

import (
	"bytes"
	"encoding/json"
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
	// forms are the byte sequences that reveal a value in JSON text: as is, and as JSON
	// escapes it (with and without HTML escaping).
	forms [][]byte
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
	out := Values{r: strings.NewReplacer(pairs...)}
	for _, v := range vals {
		out.forms = append(out.forms, []byte(v))
		for _, esc := range escapedForms(v) {
			if !bytes.Equal(esc, []byte(v)) {
				out.forms = append(out.forms, esc)
			}
		}
	}
	return out
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
	return v.r.Replace(s)
}

// Err returns an error's text redacted ("" for nil).
func (v Values) Err(err error) string {
	if err == nil {
		return ""
	}
	return v.String(err.Error())
}

// In reports whether raw (text or JSON text) holds a value, as is or JSON-escaped.
func (v Values) In(raw []byte) bool {
	for _, f := range v.forms {
		if bytes.Contains(raw, f) {
			return true
		}
	}
	return false
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
		return []byte(v.String(string(raw))), true
	}
	b, err := Encode(v.Walk(doc, nil))
	if err != nil {
		return []byte(v.String(string(raw))), true
	}
	return b, true
}

// Walk returns doc (decoded by Decode) with every value replaced in its strings and keys, and,
// when sensitiveKey is not nil, the value of every key it matches (unless an object) replaced
// by Placeholder.
func (v Values) Walk(doc any, sensitiveKey func(string) bool) any {
	switch x := doc.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if sensitiveKey != nil && sensitiveKey(k) {
				if _, isObj := val.(map[string]any); !isObj {
					out[v.String(k)] = Placeholder
					continue
				}
			}
			out[v.String(k)] = v.Walk(val, sensitiveKey)
		}
		return out
	case []any:
		for i := range x {
			x[i] = v.Walk(x[i], sensitiveKey)
		}
		return x
	case string:
		return v.String(x)
	}
	return doc
}

// Decode decodes one JSON document keeping numbers as written (json.Number).
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
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
