package executor

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactCappedSecretAtReadLimit: a payload over the audit cap is read only so far (4×cap
// of text that is not JSON, 8×cap of JSON, 2×cap of a token that goes on past that), and a
// value that straddles where the reading stops is not whole there, so it is not found. What
// was read shrinks when it is redacted (values replaced by Placeholder, white space between
// tokens dropped), and the start of the value came within the cap: it reached the audit event.
func TestRedactCappedSecretAtReadLimit(t *testing.T) {
	secret := "Zq9s3cr3tV4lue-0123456789-" + strings.Repeat("k", 76) // long: its Placeholder is shorter
	r := newRedactor([]string{secret})
	const capBytes = 1000
	secrets := func(n int) string { // secrets up to n bytes
		var b strings.Builder
		for b.Len()+len(secret)+1 < n {
			b.WriteString(secret + " ")
		}
		return b.String() + strings.Repeat(" ", n-b.Len())
	}
	for name, raw := range map[string]string{
		"text at 4×cap":         secrets(4*capBytes-20) + secret + strings.Repeat(" tail", 400),
		"JSON at 8×cap":         `{"a":` + strings.Repeat(" ", 8*capBytes-30) + `"` + secret + strings.Repeat("x", 3000) + `"}`,
		"a long token at 2×cap": `{"a":"` + secrets(2*capBytes-20) + secret + strings.Repeat("x", 10000) + `"}`,
	} {
		out, trunc := r.JSON([]byte(raw), capBytes)
		var s string
		if err := json.Unmarshal(out, &s); err != nil || !trunc {
			t.Errorf("%s: %.80s (truncated %v): not a capped JSON string: %v", name, out, trunc, err)
		}
		if strings.Contains(s, secret[:8]) {
			t.Errorf("%s: the start of the secret reached the payload: ...%q", name, s[max(0, len(s)-60):])
		}
	}
}

// TestRedactCappedEscapedSecretAtReadLimit: as TestRedactCappedSecretAtReadLimit, the value
// spelled as JSON text percent-escaped ("Z%5Cu0071…", a query parameter holding JSON), which
// String finds whole: its start where the reading stops was not seen (PartialEnd looked in the
// text decoded both kinds of escape at once only), and reached the audit event.
func TestRedactCappedEscapedSecretAtReadLimit(t *testing.T) {
	secret := "Zq9s3cr3tV4lue-0123456789-" + strings.Repeat("k", 76)
	spelled := "Z%5Cu0071" + secret[2:]
	r := newRedactor([]string{secret})
	const capBytes = 1000
	secrets := func(n int) string { // secrets up to n bytes
		var b strings.Builder
		for b.Len()+len(secret)+1 < n {
			b.WriteString(secret + " ")
		}
		return b.String() + strings.Repeat(" ", n-b.Len())
	}
	for name, raw := range map[string]string{
		"text at 4×cap":         secrets(4*capBytes-20) + spelled + strings.Repeat(" tail", 400),
		"a long token at 2×cap": `{"a":"` + secrets(2*capBytes-20) + spelled + strings.Repeat("x", 10000) + `"}`,
	} {
		out, trunc := r.JSON([]byte(raw), capBytes)
		var s string
		if err := json.Unmarshal(out, &s); err != nil || !trunc {
			t.Errorf("%s: %.80s (truncated %v): not a capped JSON string: %v", name, out, trunc, err)
		}
		if strings.Contains(s, spelled[:12]) {
			t.Errorf("%s: the start of the secret reached the payload: ...%q", name, s[max(0, len(s)-60):])
		}
	}
}
