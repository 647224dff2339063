package subjects

import (
	"fmt"
	"strings"
	"testing"
)

// quoteCut quotes as %q does, and marks a cut inside the quotes ("…" right after the last rune
// kept), where %.Nq left only the closing quote: what redact.Values.StringCut looks for.
func TestQuoteCut(t *testing.T) {
	for _, s := range []string{"", "abc", "a\"b\x00", strings.Repeat("é", 5), "\xff\xfe"} {
		if got, want := quoteCut(s, 5), fmt.Sprintf("%q", s); got != want {
			t.Errorf("quoteCut(%q, 5) = %s, want %s", s, got, want)
		}
	}
	for s, want := range map[string]string{
		"abcdefgh":                 `"abcde…"`,
		strings.Repeat("é", 6):     `"ééééé…"`,
		"ab\ncdefg":                `"ab\ncd…"`,
		"abcd" + "\xff" + "zzzzzz": `"abcd\xff…"`,
	} {
		if got := quoteCut(s, 5); got != want {
			t.Errorf("quoteCut(%q, 5) = %s, want %s", s, got, want)
		}
	}
}
