package printable

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain name":       "plain name",
		"é, 搜索, emoji 🙂":   "é, 搜索, emoji 🙂",
		"\x1b[31mred":      `\x1b[31mred`,
		"a\nb\rc\x00":      `a\x0ab\x0dc\x00`,
		"\x7f":             `\x7f`,
		"\u0085 next line": `\u0085 next line`,
		"\u202e reversed":  `\u202e reversed`,
		"bad \xff byte":    `bad \xff byte`,
		"\U000E0001 tag":   `\U000e0001 tag`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
