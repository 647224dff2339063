package subjects

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestLooksEncoded: LooksEncoded tells the shape of an encoded public name (PublicName of a pair
// too long or with odd characters) from a plain one, and from patterns and other text.
func TestLooksEncoded(t *testing.T) {
	encoded := []string{
		PublicName("my server", "create issue"),
		PublicName("github", strings.Repeat("x", 80)),
		PublicName("日本", "ツール"), // nothing survives sanitizing: "___" + "_" + hash
		PublicName(strings.Repeat("s", 70), "t"),
		PublicName("a.b", "_leading"),
		"srv___tool_1a2b3c4d5e",
	}
	for _, n := range encoded {
		if !LooksEncoded(n) {
			t.Errorf("LooksEncoded(%q) = false, want true", n)
		}
	}
	for _, n := range []string{
		PublicName("github", "create_issue"), "github__create_issue", "srv___tool_1a2b3c4d5", // 9 hex digits
		"srv___tool_1A2B3C4D5E", "srv___tool_1a2b3c4d5e*", "srv___*_1a2b3c4d5e", "srv__tool_1a2b3c4d5e",
		"srv___tool__1a2b3c4d5e", "_srv___tool_1a2b3c4d5e", "", "*", strings.Repeat("s", 21) + "___t_1a2b3c4d5e",
		"srv___" + strings.Repeat("t", 60) + "_1a2b3c4d5e", // longer than 64
	} {
		if LooksEncoded(n) {
			t.Errorf("LooksEncoded(%q) = true, want false", n)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab_-Z9. é__")
	word := func() string {
		b := make([]rune, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 5000 {
		s, tool := word(), word()
		n := PublicName(s, tool)
		_, _, plain := SplitPlain(n)
		if LooksEncoded(n) == plain {
			t.Fatalf("PublicName(%q, %q) = %q: plain %v, LooksEncoded %v", s, tool, n, plain, LooksEncoded(n))
		}
	}
}
