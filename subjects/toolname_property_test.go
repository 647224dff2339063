package subjects

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// stressName draws names that stress the encoding: plain words, separators that sanitize to the
// same thing, "__" inside names, unicode, leading underscores and lengths around the limits.
func stressName(rng *rand.Rand) string {
	pieces := []string{"a", "b", "x", "get", "list", "issue", "_", "__", "-", ".", " ", "/", "~", "数据", "é", "A", "9"}
	n := 1 + rng.IntN(8)
	if rng.IntN(10) == 0 {
		n = 20 + rng.IntN(40) // long
	}
	var b strings.Builder
	for range n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// TestPublicNameDistinctPairsProperty: for many random (server, tool) pairs, every public name
// is valid, namespaced, never a reserved meta-tool name, and distinct pairs give distinct
// names; plain names split back to their pair.
func TestPublicNameDistinctPairsProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type pair struct{ server, tool string }
	seen := map[string]pair{}
	for range 200_000 {
		p := pair{stressName(rng), stressName(rng)}
		name := PublicName(p.server, p.tool)
		if !ValidPublicName(name) || !strings.Contains(name, "__") || slices.Contains(Reserved, name) {
			t.Fatalf("PublicName(%q, %q) = %q: not a valid namespaced name", p.server, p.tool, name)
		}
		if prev, ok := seen[name]; ok && prev != p {
			t.Fatalf("%q given to (%q, %q) and (%q, %q)", name, prev.server, prev.tool, p.server, p.tool)
		}
		seen[name] = p
		if s, tl, ok := SplitPlain(name); ok && (s != p.server || tl != p.tool) {
			t.Fatalf("SplitPlain(%q) = (%q, %q), want (%q, %q)", name, s, tl, p.server, p.tool)
		}
	}
}

// TestPublicNameNULInServer: a NUL byte inside a name is no separator of the hash input, so
// these two pairs (which once shared a name) get distinct names.
func TestPublicNameNULInServer(t *testing.T) {
	a, b := PublicName("9\x00", " "), PublicName("9", "\x00 ")
	if a == b {
		t.Errorf("(%q, %q) and (%q, %q) both give %q", "9\x00", " ", "9", "\x00 ", a)
	}
}
