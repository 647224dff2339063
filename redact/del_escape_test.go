package redact

import (
	"strings"
	"testing"
)

// TestDELEscape: a value holding DEL (U+007F), which encoding/json writes as it is and
// Python's json (ensure_ascii) writes as \u007f, was not found so spelled: In said the text
// held no value (DEL is neither printable ASCII for EscapesASCII nor one of the characters
// escapesValueRune looked for), and JSON returned it unchanged.
func TestDELEscape(t *testing.T) {
	v := New("ab\x7fcdefgh")
	for _, in := range []string{`{"x":"ab\u007fcdefgh"}`, `{"x":"ab\u007Fcdefgh"}`} {
		if !v.In([]byte(in)) {
			t.Errorf("In(%s) = false", in)
		}
		if out, _ := v.JSON([]byte(in)); strings.Contains(string(out), "cdefgh") {
			t.Errorf("JSON(%s) = %s", in, out)
		}
	}
}
