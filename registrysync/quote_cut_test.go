package registrysync

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/redact"
)

// TestQuoteSecretAtCut: a text whose values, replaced, shrink it a lot (a long secret, again
// and again) is quoted from its start, redacted: the value the read bound cut in two is
// replaced too, not a byte of it is left.
func TestQuoteSecretAtCut(t *testing.T) {
	secret := strings.Repeat("Zq9", 300) // a long credential (a private key, a JWT)
	red := newRedactor(ServerConfig{Secrets: []string{secret}})
	for _, spell := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { // every byte JSON-escaped
			var b strings.Builder
			for i := 0; i < len(s); i++ {
				fmt.Fprintf(&b, `\u%04x`, s[i])
			}
			return b.String()
		},
	} {
		text := strings.Repeat(spell(secret)+" ", 200)
		for _, n := range []int{120, 300, 1000} {
			got := quote(red, text, n)
			if strings.Contains(got, secret[:redact.MinLen]) || strings.Contains(got, spell(secret)[:redact.MinLen]) {
				t.Errorf("quote(n=%d) = %q: part of the secret left", n, got)
			}
			if !strings.HasPrefix(got, "[redacted] [redacted]") {
				t.Errorf("quote(n=%d) = %.80q", n, got)
			}
		}
	}
}
