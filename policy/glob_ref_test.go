package policy

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// refGlob is a reference for glob over a valid UTF-8 pattern: a plain backtracking matcher
// that reads the name one character at a time (a byte that is not UTF-8 is one character, as
// utf8.DecodeRuneInString reads it). It assumes the pattern well formed (glob decides that).
func refGlob(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '*':
		for i := 0; ; {
			if refGlob(pat[1:], s[i:]) {
				return true
			}
			if i == len(s) {
				return false
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
		}
	case '?':
		if s == "" {
			return false
		}
		_, n := utf8.DecodeRuneInString(s)
		return refGlob(pat[1:], s[n:])
	case '[':
		if s == "" {
			return false
		}
		r, n := utf8.DecodeRuneInString(s)
		p := pat[1:]
		negated := strings.HasPrefix(p, "^")
		if negated {
			p = p[1:]
		}
		match := false
		for first := true; first || p[0] != ']'; first = false {
			lo, k := classChar(p)
			p = p[k:]
			hi := lo
			if p[0] == '-' {
				hi, k = classChar(p[1:])
				p = p[1+k:]
			}
			match = match || lo <= r && r <= hi
		}
		if match == negated {
			return false
		}
		return refGlob(p[1:], s[n:])
	case '\\':
		pat = pat[1:]
	}
	_, n := utf8.DecodeRuneInString(pat)
	return strings.HasPrefix(s, pat[:n]) && refGlob(pat[n:], s[n:])
}

// classChar reads a possibly escaped character of a class: the rune and the bytes it took.
func classChar(p string) (rune, int) {
	k := 0
	if p[0] == '\\' {
		k = 1
	}
	r, n := utf8.DecodeRuneInString(p[k:])
	return r, k + n
}

// TestGlobMatchesCharacters: '*' takes whole characters and '?' or a class one character,
// never a part of one: "*[^é]" matched "é" ('*' took the first byte of é, and the class its
// second, a character that is not é) and "x*??" matched "x€" (each '?' one byte of €). Random
// valid UTF-8 patterns (with '/', multi-byte runes and classes) against names, invalid bytes
// included, compared with a matcher that reads characters (300,000 pairs).
func TestGlobMatchesCharacters(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"*[^é]", "é", false},
		{"*[^é]x", "éx", false},
		{"x*??", "x€", false},
		{"x*??", "x€a", true},
		{"*[一-\uffff]", "café", false},
		{"*[一-\uffff]", "caf一", true},
		{"*?", "é", true},
		{"*[^a]", "\xff", true},
		{"a*[^x]", "a\xc3\xa9", true},
	} {
		if got := Match(c.pat, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	pats := []string{"a", "b", "/", "é", "€", "😀", "*", "*", "?", "\\*", "\\é", "[^é]", "[a-é]", "[é-😀]", "[^/]", "[+-1]", "[^a-b]", "[一-\uffff]"}
	names := []string{"a", "b", "/", "é", "€", "😀", "\xff", "\xa9", "\xc3", "*", "\uffff", "一"}
	word := func(alpha []string, n int) string {
		var b strings.Builder
		for range r.IntN(n) {
			b.WriteString(alpha[r.IntN(len(alpha))])
		}
		return b.String()
	}
	for range 300_000 {
		pat, s := word(pats, 6), word(names, 7)
		got, err := glob(pat, s)
		if err != nil {
			t.Fatalf("glob(%q, %q): %v", pat, s, err)
		}
		if want := refGlob(pat, s); got != want {
			t.Fatalf("glob(%q, %q) = %v, reading characters says %v", pat, s, got, want)
		}
	}
}

// TestValidPatternAsBefore: ValidPattern refuses exactly the patterns it refused when it
// checked each part with path.Match, '/' turned into NUL (random patterns over the
// metacharacters, '/', NUL, "__" and bytes that are not UTF-8; 300,000).
func TestValidPatternAsBefore(t *testing.T) {
	old := func(pat string) bool {
		if pat == "" || NoToolPart(pat) || emptyPart(pat) {
			return false
		}
		parts := []string{pat}
		if sp, tp, ok := strings.Cut(pat, "__"); ok {
			parts = append(parts, sp, tp)
		}
		for _, p := range parts {
			if _, err := path.Match(strings.ReplaceAll(p, "/", "\x00"), ""); err != nil {
				return false
			}
		}
		return true
	}
	r := rand.New(rand.NewPCG(7, 8))
	alpha := []string{"a", "_", "__", "/", "\x00", "*", "?", "[", "]", "^", "-", "\\", "é", "\xff", "\xc3"}
	for range 300_000 {
		var b strings.Builder
		for range r.IntN(10) {
			b.WriteString(alpha[r.IntN(len(alpha))])
		}
		if pat := b.String(); ValidPattern(pat) != old(pat) {
			t.Fatalf("ValidPattern(%q) = %v, before %v", pat, ValidPattern(pat), old(pat))
		}
	}
}
