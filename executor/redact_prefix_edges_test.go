package executor

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactLargeInvalidJSONSensitiveValues: a payload over 8 times the cap that stops being
// JSON part way (a request refused for not being JSON is audited as it came) kept everything
// from the syntax error on as text redacted of secret values only: the value of a sensitive key
// after it went to the audit stream. The rest is now left out, as when the payload is smaller.
func TestRedactLargeInvalidJSONSensitiveValues(t *testing.T) {
	r := newRedactor([]string{"Zq9s3cr3tV4lue"})
	pad := `,"pad":"` + strings.Repeat("x", 40000) + `"}`
	for _, in := range []string{
		`{"a":"x", oops "password":"sk-live-123"` + pad,
		`{"a":"x","b":[1,2 "password":["sk-live-123"]` + pad,
		`{"a":"x","arguments":{"token":sk-live-123}` + pad,
		`{"a":"x"} "password":"sk-live-123"` + pad,
	} {
		out, trunc := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "sk-live") || !json.Valid(out) || !trunc {
			t.Errorf("%.60s…: truncated %v, got %.300s", in, trunc, out)
		}
	}
}

// TestRedactCappedNumberAtReadLimit: a number that the bytes redactPrefix decodes (8 times the
// cap) stop inside of, or that a document cut short ends with, was decoded as a shorter number
// (the decoder ends a number where its input ends) and kept: the first digits of a secret made
// of digits, not whole, were not found. (A string cut so is left out.)
func TestRedactCappedNumberAtReadLimit(t *testing.T) {
	r := newRedactor([]string{"8675309123"})
	for _, in := range []string{`{"k":867530912`, `{"k":[1,8675309`, `{"k":86753.09`} {
		out, trunc := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "867") || !json.Valid(out) || !trunc {
			t.Errorf("%s: truncated %v, got %s", in, trunc, out)
		}
	}
	for at := 32755; at < 32770; at++ {
		// White space shrinks once decoded: the number is reached before the cap is.
		in := `{"a":` + strings.Repeat(" ", at-5) + `8675309123,"b":"` + strings.Repeat("x", 100) + `"}`
		out, trunc := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "867") || !json.Valid(out) || !trunc {
			t.Errorf("number at %d: truncated %v, got %.100s", at, trunc, out)
		}
	}
}

// TestRedactCappedNumberCutInsideAtReadLimit: a number the bytes redactPrefix decodes stop
// inside of where the decoder cannot end it (after its '.', 'e', 'e+' or '-': not a number yet)
// was kept as text: 8.675309123e9, a numeric secret in exponent form, cut after its 'e' printed
// every digit of the secret (8.675309123e), which no longer matches it. Such a start of a
// number is left out too, as one the decoder ends where the bytes do.
func TestRedactCappedNumberCutInsideAtReadLimit(t *testing.T) {
	r := newRedactor([]string{"8675309123"})
	const max = 256
	for _, num := range []string{"8.675309123e9", "8.675309123E+9", "86753091.23e2", "0.8675309123e10"} {
		for cut := 1; cut <= len(num); cut++ {
			// The decoded bytes (8×max) end after num[:cut].
			raw := `{"a":` + strings.Repeat(" ", 8*max-8-cut) + `[1,` + num + `,2],"z":"` + strings.Repeat("y", 3000) + `"}`
			out, trunc := r.JSON([]byte(raw), max)
			if strings.Contains(strings.ReplaceAll(string(out), ".", ""), "675309") || !json.Valid(out) || !trunc {
				t.Errorf("%s cut after %q: truncated %v, got %s", num, num[:cut], trunc, out)
			}
		}
	}
}
