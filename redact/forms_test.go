package redact

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// leaksBase64 reports whether a piece of out between placeholders still decodes, at some
// alignment and in either alphabet, to text holding mid (the secret less a byte at each end:
// the character that also encodes a byte next to the secret at each end is not redacted).
func leaksBase64(out, mid string) bool {
	for _, piece := range strings.Split(out, Placeholder) {
		for off := range 4 {
			if off > len(piece) {
				break
			}
			p := piece[off:]
			p = strings.TrimRight(p, "=")
			p = p[:len(p)/4*4]
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				if b, err := enc.DecodeString(p); err == nil && bytes.Contains(b, []byte(mid)) {
					return true
				}
			}
		}
	}
	return false
}

// A tool that echoes a secret base64-encoded (a header dump, a JWT-like blob, a data: URL): the
// encoding alone, in either alphabet, padded or not, or inside a longer base64 text at each of
// the three alignments the secret can have there, is redacted.
func TestBase64Secret(t *testing.T) {
	const secret = "s3cret-t0k?n>>~~"
	v := New(secret)
	mid := secret[1 : len(secret)-1]
	rng := rand.New(rand.NewPCG(3, 4))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		alone := enc.EncodeToString([]byte(secret))
		if got := v.String("auth " + alone + " ok"); got != "auth "+Placeholder+" ok" {
			t.Errorf("String(%s) = %q, want it redacted whole", alone, got)
		}
		for before := range 6 {
			for after := range 4 {
				blob := make([]byte, 0, before+len(secret)+after)
				for range before {
					blob = append(blob, byte(rng.IntN(256)))
				}
				blob = append(blob, secret...)
				for range after {
					blob = append(blob, byte(rng.IntN(256)))
				}
				text := enc.EncodeToString(blob)
				out := v.String(text)
				if out == text || leaksBase64(out, mid) {
					t.Errorf("%d bytes before, %d after: String(%s) = %s: the secret is still there", before, after, text, out)
				}
				raw := []byte(`{"data":"` + text + `"}`)
				if !v.In(raw) {
					t.Errorf("In(%s) = false", raw)
				}
				if o, changed := v.JSON(raw); !changed || leaksBase64(string(o), mid) {
					t.Errorf("JSON(%s) = %s, %v", raw, o, changed)
				}
			}
		}
	}
}

// A secret percent-escaped — url.QueryEscape, url.PathEscape, lower-case hex digits, or only
// some of its characters escaped — is redacted, in text and in JSON.
func TestPercentEncodedSecret(t *testing.T) {
	const secret = "a/b c&d=e?f+g"
	v := New(secret)
	lower := strings.NewReplacer("%2F", "%2f", "%3F", "%3f", "%3D", "%3d", "%2B", "%2b").Replace(url.QueryEscape(secret))
	for _, enc := range []string{
		url.QueryEscape(secret),
		url.PathEscape(secret),
		lower,
		"a%2Fb c&d=e?f+g",
		"a/b%20c%26d=e?f%2Bg",
	} {
		in := "GET https://api.example.com/x?k=" + enc + "&n=1"
		out := v.String(in)
		if strings.Contains(out, enc) || !strings.Contains(out, Placeholder) || !strings.HasSuffix(out, "&n=1") {
			t.Errorf("String(%s) = %s", in, out)
		}
		raw := []byte(`{"url":"` + in + `"}`)
		if !v.In(raw) {
			t.Errorf("In(%s) = false", raw)
		}
		if o, changed := v.JSON(raw); !changed || strings.Contains(string(o), enc) {
			t.Errorf("JSON(%s) = %s, %v", raw, o, changed)
		}
	}
	// Percent escapes that spell no secret leave the text as it is.
	in := []byte(`{"url":"https://example.com/?q=caf%C3%A9%20au%20lait&p=100%"}`)
	if out, changed := v.JSON(in); changed || !bytes.Equal(out, in) {
		t.Errorf("JSON(%s) = %s, %v; want it unchanged", in, out, changed)
	}
}

// A hex secret (case-insensitive in practice: tools print hex either way) is redacted in the
// other letter case too; other secrets are case-sensitive (a password "Summer2026" is not
// "SUMMER2026"), and short hex values are not folded (they are too much like words).
func TestHexSecretLetterCase(t *testing.T) {
	v := New("deadbeef0123abcd", "0F1E2D3C4B5A6978", "123e4567-e89b-12d3-a456-426614174000", "Summer2026", "c0ffee")
	for _, in := range []string{"DEADBEEF0123ABCD", "0f1e2d3c4b5a6978", "123E4567-E89B-12D3-A456-426614174000", "deadbeef0123abcd"} {
		if got := v.String("id=" + in + ";"); got != "id="+Placeholder+";" {
			t.Errorf("String(%s) = %s, want it redacted", in, got)
		}
	}
	for _, in := range []string{"SUMMER2026", "summer2026", "C0FFEE"} {
		if got := v.String("x " + in); got != "x "+in {
			t.Errorf("String(%s) = %s, want it unchanged", in, got)
		}
	}
}

// A secret spelled with JSON escapes inside text that is not decoded as JSON — a log line, a
// JSON document quoted in a JSON string, JSON cut short — is redacted.
func TestSecretSplitByJSONEscapes(t *testing.T) {
	v := New("hunter22", "pa<ss>word", "key-😀-xyz")
	for in, want := range map[string]string{
		`level=info msg="pw hunt\u0065r22 ok"`:        `level=info msg="pw ` + Placeholder + ` ok"`,
		`{"pw":"\u0068\u0075nter22","b":`:             `{"pw":"` + Placeholder + `","b":`,
		`x pa\u003Css\u003eword y`:                    `x ` + Placeholder + ` y`,
		`x key-\ud83d\ude00-xyz y`:                    `x ` + Placeholder + ` y`,
		`x hunter\u00322 and hunter22`:                `x ` + Placeholder + ` and ` + Placeholder,
		`ok \u0041 \\u0068unter22 \/ \u00e9 \ud83d x`: `ok \u0041 \\u0068unter22 \/ \u00e9 \ud83d x`,
	} {
		if got := v.String(in); got != want {
			t.Errorf("String(%s) = %s, want %s", in, got, want)
		}
		if got := v.Text(in); got != want {
			t.Errorf("Text(%s) = %s, want %s", in, got, want)
		}
	}
	// A JSON document quoted in a JSON string (a tool that returns JSON as text).
	raw := []byte(`{"content":[{"type":"text","text":"{\"token\":\"hunt\\u0065r22\"}"}]}`)
	out, changed := v.JSON(raw)
	if !changed || strings.Contains(string(out), `u0065r22`) {
		t.Errorf("JSON(%s) = %s, %v", raw, out, changed)
	}
}

// A secret made of digits written by a JSON encoder as a number in exponent form is redacted:
// the number goes whole.
func TestNumericSecretExponentForm(t *testing.T) {
	v := New("8675309", "31415.9265")
	for _, n := range []string{"8.675309e6", "8675309e0", "86753.09E+2", "8.675309E6", "867530900e-2", "0.08675309e8",
		"-8.675309e6", "8.675309e999999999999", "3.14159265e4", "314159265E-4"} {
		in := `{"pin":` + n + `,"a":[1,` + n + `]}`
		if !v.In([]byte(in)) {
			t.Errorf("In(%s) = false", in)
		}
		out, changed := v.JSON([]byte(in))
		if want := `{"a":[1,"[redacted]"],"pin":"[redacted]"}`; !changed || string(out) != want {
			t.Errorf("JSON(%s) = %s, %v; want %s", in, out, changed, want)
		}
		if !v.Number(n) {
			t.Errorf("Number(%s) = false", n)
		}
	}
	for _, n := range []string{"8.675308e6", "1e400", "8675308.5e-1", "1.5", "8.67e6", "-1e-99999999999999999999"} {
		in := `{"n":` + n + `}`
		if out, changed := v.JSON([]byte(in)); changed || string(out) != in {
			t.Errorf("JSON(%s) = %s, %v; want it unchanged", in, out, changed)
		}
	}
}

// The forms of a value are bounded in number and size (see forms.go): a list of N secrets
// makes a matcher that grows with the secrets' total length, not a product of forms.
func TestFormsBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := MinLen; n <= 200; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		for _, v := range []string{string(b), strings.Repeat("ab cd", n)[:n], fmt.Sprintf("%0*x", n, n)[:n]} {
			fs := forms(v)
			total := 0
			for _, f := range fs {
				total += len(f)
			}
			if len(fs) > maxForms || total > 32*len(v)+16 {
				t.Errorf("value of %d bytes: %d forms, %d bytes", len(v), len(fs), total)
			}
		}
	}
}

// Encoded forms do not make ordinary text unreadable: short secrets get no base64 or case
// forms, and text with base64 blobs, percent escapes and hex that spell no secret is unchanged.
func TestEncodedFormsKeepOrdinaryText(t *testing.T) {
	for name, raw := range benchDocs() {
		// (A 3-byte secret such as "abc" is found as itself in 256 KB of base64, by chance:
		// so it always was.)
		if out, changed := New(benchSecrets(30)...).JSON(raw); changed || !bytes.Equal(out, raw) {
			t.Errorf("%s: JSON changed it", name)
		}
	}
	v := New(append(benchSecrets(30), "abc", "test", "cafe")...)
	for _, s := range []string{"YWJj dGVzdA== Y2FmZQ", "TEST CAFE Cafe"} {
		if got := v.String(s); got != s {
			t.Errorf("String(%s) = %s, want it unchanged", s, got)
		}
	}
	if got := v.String("%61bc"); got != Placeholder {
		t.Errorf(`String("%%61bc") = %s: a percent escape of a secret is the secret`, got)
	}
}

// FuzzString: String finds every occurrence of a value as it is and of its base64 form, in
// any text, and never fails on text of any shape (cut escapes, invalid UTF-8).
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "hunter22", `\u0068unter22`, "%68unter22", "aHVudGVyMjI=", `\`, `%`, `\ud83d`, "x\xffhunter22\\u00"} {
		f.Add(s)
	}
	v := New("hunter22", "5ecr3t-t0ken")
	b64 := base64.StdEncoding.EncodeToString([]byte("5ecr3t-t0ken"))
	f.Fuzz(func(t *testing.T, s string) {
		out := v.String(s)
		for _, secret := range []string{"hunter22", "5ecr3t-t0ken", b64} {
			if strings.Contains(out, secret) {
				t.Errorf("String(%q) = %q holds %q", s, out, secret)
			}
		}
	})
}

// In decodes long text a window at a time: a percent-escaped secret across a window's edge is
// found all the same.
func TestInPercentAcrossWindows(t *testing.T) {
	const secret = "a/b&c=d?e/f/g/h"
	v := New(secret)
	esc := url.PathEscape(strings.ReplaceAll(secret, "/", "\x00"))
	esc = strings.ReplaceAll(esc, "%00", "%2f")
	for off := 16<<10 - 2*len(esc); off <= 16<<10+2; off++ {
		raw := []byte(strings.Repeat("x", off) + esc + strings.Repeat("y", 20<<10) + "%41")
		if !v.In(raw) {
			t.Fatalf("offset %d: In = false", off)
		}
	}
}
