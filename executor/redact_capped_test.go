package executor

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactCapped: a payload over the audit cap is redacted like a small one before it is cut.
// Redacting only the kept start as text let through a sensitive key's array value, a key or a
// secret spelled with escapes, and a secret holding characters JSON escapes.
func TestRedactCapped(t *testing.T) {
	r := newRedactor([]string{`pa"ss<word>`, "hunter22"})
	pad := `,"pad":"` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, in string
		secrets  []string
	}{
		{"sensitive key with an array value", `{"api_key":["sk-live-123"]` + pad, []string{"sk-live-123"}},
		{"sensitive key spelled with an escape", `{"pass\u0077ord":"sk-live-456"` + pad, []string{"sk-live-456"}},
		{"secret value spelled with an escape", `{"note":"hunt\u0065r22"` + pad, []string{`hunt\\u0065r22`, "hunter22"}},
		{"secret value with a quote", `{"note":"pa\"ss\u003cword\u003e"` + pad, []string{`pa\\\"ss`, `pa\"ss`}},
		{"secret in a nested array", `{"items":[{"x":["hunter22"]}]` + pad, []string{"hunter22"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			small, _ := r.JSON([]byte(strings.Replace(tc.in, pad, "}", 1)), 4096)
			big, trunc := r.JSON([]byte(tc.in), 4096)
			if !trunc || len(big) > 4096+64 {
				t.Fatalf("want a capped payload, got %d bytes (truncated %v)", len(big), trunc)
			}
			for _, s := range tc.secrets {
				if strings.Contains(string(small), s) || strings.Contains(string(big), s) {
					t.Errorf("%s kept:\n small %.200s\n big   %.200s", s, small, big)
				}
			}
		})
	}
	// Text that is not JSON (or JSON cut short) is redacted as text, in every spelling.
	for _, tc := range []struct{ name, in, secret string }{
		{"not JSON", "log line: token=hunter22 " + strings.Repeat("y", 5000), "hunter22"},
		{"escaped form in text", `cut {"note":"pa\"ss\u003cword\u003e` + strings.Repeat("z", 5000), `pa\"ss`},
		{"sensitive key in cut JSON", `{"password":"opensesame","x":"` + strings.Repeat("q", 5000), "opensesame"},
		{"escape that hides a letter", `{"note":"hunt\u0065r22" ` + strings.Repeat("w", 5000), "hunt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := r.JSON([]byte(tc.in), 4096)
			if strings.Contains(string(out), tc.secret) {
				t.Errorf("%s kept: %.200s", tc.secret, out)
			}
		})
	}
}

// BenchmarkAuditLargeResult: the audit payload of a large result costs what the cap needs,
// not the result's size (decoding, walking and encoding 4 MiB whole: ~180 ms, ~100 MB).
func BenchmarkAuditLargeResult(b *testing.B) {
	r := newRedactor([]string{"hunter22"})
	text, _ := json.Marshal(strings.Repeat("a token in prose, ", 4<<20/18))
	raw := []byte(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		out, trunc := r.json(raw, 4096, true)
		if !trunc || len(out) > 4200 {
			b.Fatalf("%d bytes, truncated %v", len(out), trunc)
		}
	}
}

// TestRedactLargeResult: a result far over the cap is read only as far as the cap needs; what
// is kept is redacted all the same: a secret in the kept start of one huge text, and a
// sensitive key's huge value.
func TestRedactLargeResult(t *testing.T) {
	r := newRedactor([]string{"hunter22"})
	huge := strings.Repeat("lorem ipsum ", 100_000)
	for name, tc := range map[string]struct{ in, secret string }{
		"secret in a huge text":       {`{"content":[{"type":"text","text":"see hunter22 then ` + huge + `"}]}`, "hunter22"},
		"escaped secret in huge text": {`{"content":[{"type":"text","text":"see hunt\u0065r22 then ` + huge + `"}]}`, "hunt"},
		"sensitive key, huge value":   {`{"apiKey":"sk-live-777 ` + huge + `","n":1}`, "sk-live-777"},
		"sensitive key, huge array":   {`{"tokens":["sk-live-888",` + strings.Repeat(`"x",`, 50_000) + `"y"],"n":1}`, "sk-live-888"},
	} {
		t.Run(name, func(t *testing.T) {
			out, trunc := r.JSON([]byte(tc.in), 4096)
			if !trunc || len(out) > 4096+64 || !json.Valid(out) {
				t.Fatalf("%d bytes, truncated %v, valid %v", len(out), trunc, json.Valid(out))
			}
			if strings.Contains(string(out), tc.secret) {
				t.Errorf("%s kept: %.300s", tc.secret, out)
			}
		})
	}
}
