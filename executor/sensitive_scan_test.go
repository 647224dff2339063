package executor

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// holdsSensitiveKeyRef is the definition holdsSensitiveKey implements in one pass: some
// sensitive key is a substring of raw with its ASCII capitals lower-cased.
func holdsSensitiveKeyRef(raw []byte) bool {
	lower := bytes.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, raw)
	for _, k := range sensitiveKeys {
		if bytes.Contains(lower, []byte(k)) {
			return true
		}
	}
	return false
}

func TestHoldsSensitiveKey(t *testing.T) {
	for _, k := range sensitiveKeys {
		if len(k) < 2 || k[0] < 'a' || k[0] > 'z' || k[1] < 'a' || k[1] > 'z' || k != strings.ToLower(k) {
			t.Fatalf("sensitive key %q: holdsSensitiveKey needs lower-case keys starting with two letters", k)
		}
	}
	cases := []string{
		"", "p", "pass", "passwd", "PassWord", `{"api-key":1}`, `{"API_KEY":1}`, `apikey`, "x-Authorization",
		"toke", "tokeN", "cookies", "secre", "SECRET!", "privatekey", "private key", "client_key", "clientkey",
		"accesskey", "access_key", "credentia", "credentials", "passphras", "é token é", "\xff\xfepassword",
		`{"content":[{"type":"text","text":"the quick brown fox"}]}`, "CrEdEnTiAl", "tokentoken",
	}
	alphabet := []string{"a", "p", "s", "t", "c", "o", "k", "e", "n", "_", "-", "A", "P", "S", "T", "K", "E", "N", "w", "r", "d",
		"i", "y", "\"", "é", "\xff", "password", "token", "api", "key", "secret", "cookie", "access", "client", "private"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if got, want := holdsSensitiveKey([]byte(c)), holdsSensitiveKeyRef([]byte(c)); got != want {
			t.Errorf("holdsSensitiveKey(%q) = %v, want %v", c, got, want)
		}
	}
}

func FuzzHoldsSensitiveKey(f *testing.F) {
	for _, s := range []string{"", "PassWord", `{"api-key":1}`, "tokeN", "\xffsecret"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := holdsSensitiveKey(raw), holdsSensitiveKeyRef(raw); got != want {
			t.Errorf("holdsSensitiveKey(%q) = %v, want %v", raw, got, want)
		}
	})
}

// BenchmarkClean compares the one-pass scan with the reference on a typical 2 KB tool result
// (the scan it replaced, lower-cased copy then a search per key, took ~20 µs: 7× the scan).
func BenchmarkClean(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("Travel policy: economy class for flights under 6 hours, per diem as listed; hotels up to the city cap. ", 20) + `"}],"isError":false}`)
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			holdsSensitiveKey(raw)
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			holdsSensitiveKeyRef(raw)
		}
	})
}
