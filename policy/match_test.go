package policy

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// slowMatch is Match as path.Match alone does it, the reference of its fast paths.
func slowMatch(pat, s string) bool {
	ok, err := path.Match(strings.ReplaceAll(pat, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
	return err == nil && ok
}

// TestMatchFastPathsAsPathMatch: Match's fast paths (literal, "*", "prefix*", "*suffix") answer
// as path.Match does, on random patterns and names over a small alphabet with the separators
// and metacharacters that matter.
func TestMatchFastPathsAsPathMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alpha = "ab_/.-*?[]\\"
	word := func(meta bool) string {
		var b strings.Builder
		for range r.IntN(6) {
			c := alpha[r.IntN(len(alpha))]
			if !meta && strings.IndexByte("*?[]\\", c) >= 0 {
				c = 'a'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	for i := range 200_000 {
		pat, s := word(true), word(false)
		switch i % 4 { // the shapes of the fast paths, often
		case 1:
			pat = word(false) + "*"
		case 2:
			pat = "*" + word(false)
		}
		if got, want := Match(pat, s), slowMatch(pat, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pat, s, got, want)
		}
	}
}

func BenchmarkMatchTool(b *testing.B) {
	for _, pat := range []string{"*", "github__*", "github__create*", "git?ub__[a-c]*"} {
		b.Run(pat, func(b *testing.B) {
			for b.Loop() {
				MatchTool(pat, "github", "create_issue")
			}
		})
	}
}
