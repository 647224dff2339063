package redact

import (
	"strings"
	"testing"
)

// A secret made of digits that a tool result carries as a JSON number is still redacted: In
// finds it in the bytes, so the decoded document must not let it through untouched.
func TestJSONNumericSecret(t *testing.T) {
	v := New("8675309")
	for _, in := range []string{`{"pin":8675309}`, `[1,86753090]`, `{"n":-8675309.5}`} {
		out, changed := v.JSON([]byte(in))
		if !changed || strings.Contains(string(out), "8675309") {
			t.Errorf("JSON(%s) = %s, %v: the secret is still there", in, out, changed)
		}
		if _, err := Decode(out); err != nil {
			t.Errorf("JSON(%s) = %s: not JSON any more: %v", in, out, err)
		}
	}
	doc, err := Decode([]byte(`{"a":[8675309]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Encode(v.Walk(doc, nil))
	if strings.Contains(string(b), "8675309") {
		t.Errorf("Walk kept a numeric secret: %s", b)
	}
}

// JSON written by encoders other than encoding/json spells characters with escapes it does not
// write: upper-case hex ("\u003C", .NET) and non-ASCII characters ("\u00e4", Python's
// ensure_ascii, .NET). A secret so spelled is still redacted.
func TestJSONOtherEncodersEscapes(t *testing.T) {
	v := New("pa<ss>word", "pässwort", "key-😀-xyz")
	for _, in := range []string{
		`{"text":"pw pa\u003Css\u003Eword"}`,
		`{"text":"pw p\u00e4sswort"}`,
		`{"text":"pw p\u00E4sswort"}`,
		`{"text":"pw key-\ud83d\ude00-xyz"}`,
	} {
		out, changed := v.JSON([]byte(in))
		if !changed || string(out) != `{"text":"pw [redacted]"}` {
			t.Errorf("JSON(%s) = %s, %v; want the secret redacted", in, out, changed)
		}
	}
	// Text with such escapes that hides no secret stays as it is.
	in := `{"text":"\u00e9t\u00E9 \u003C"}`
	if out, changed := v.JSON([]byte(in)); changed || string(out) != in {
		t.Errorf("JSON(%s) = %s, %v; want it unchanged", in, out, changed)
	}
}

// Two secrets that overlap in the text (the end of one is the start of the other) are both
// hidden: no part of either is left.
func TestOverlappingSecrets(t *testing.T) {
	v := New("hunter22", "22fa-token-x")
	for _, in := range []string{"hunter22fa-token-x", "xhunter22fa-token-x!"} {
		got := v.String(in)
		if strings.Contains(got, "fa-token") || strings.Contains(got, "hunter") {
			t.Errorf("String(%q) = %q: part of a secret is left", in, got)
		}
		if got := v.Text(in); strings.Contains(got, "fa-token") || strings.Contains(got, "hunter") {
			t.Errorf("Text(%q) = %q: part of a secret is left", in, got)
		}
	}
	out, _ := v.JSON([]byte(`{"a":"hunter22fa-token-x"}`))
	if strings.Contains(string(out), "fa-token") {
		t.Errorf("JSON: %s: part of a secret is left", out)
	}
	if got := v.String("hunter22 and 22fa-token-x"); got != "[redacted] and [redacted]" {
		t.Errorf("String = %q", got)
	}
}

// JSON that cannot be decoded (cut short) is redacted as Text is: escaped spellings included.
func TestJSONUndecodableEscapedSecret(t *testing.T) {
	v := New(`pa"ss<word>`)
	in := `{"a":"pa\"ss\u003cword\u003e","b":`
	out, changed := v.JSON([]byte(in))
	if !changed || strings.Contains(string(out), `pa\"ss`) {
		t.Errorf("JSON(%s) = %s, %v: the secret is still there", in, out, changed)
	}
}

// A document followed by more text is not one JSON document: what follows the first value is
// not dropped from the check.
func TestJSONTrailingData(t *testing.T) {
	v := New("s3cret")
	in := `{"a":1} {"b":"s3cret"}`
	out, _ := v.JSON([]byte(in))
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("JSON(%s) = %s: the secret is still there", in, out)
	}
}
