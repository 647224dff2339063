package subjects

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestPublicName(t *testing.T) {
	tests := []struct {
		server, tool string
		want         string // "" = encoded: check form only
	}{
		{"github", "create_issue", "github__create_issue"},
		{"logging", "getLogs", "logging__getLogs"},
		{"bing-cn-mcp", "bing_search", "bing-cn-mcp__bing_search"},
		{"my_server", "x", "my_server__x"},
		{"Ant Design Components", "list-components", ""},
		{"srv", "a.b/c d", ""},
		{"srv", "_private", ""},
		{"a__b", "c", ""},
		{"srv", strings.Repeat("x", 80), ""},
		{"中文", "工具", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		got := PublicName(tt.server, tt.tool)
		if !ValidPublicName(got) || !strings.Contains(got, "__") {
			t.Errorf("PublicName(%q, %q) = %q: not a valid namespaced name", tt.server, tt.tool, got)
		}
		if tt.want != "" && got != tt.want {
			t.Errorf("PublicName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
		if s, tl, ok := SplitPlain(got); ok && (s != tt.server || tl != tt.tool) {
			t.Errorf("SplitPlain(%q) = %q, %q; want %q, %q", got, s, tl, tt.server, tt.tool)
		}
		if slices.Contains(Reserved, got) {
			t.Errorf("PublicName(%q, %q) = reserved name %q", tt.server, tt.tool, got)
		}
	}
}

// Property: distinct (server, tool) pairs give distinct public names.
func TestPublicNameInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	parts := []string{"a", "b", "_", "__", "-", ".", " ", "x1", "Ü", "中", "get", "Logs", strings.Repeat("z", 30)}
	gen := func() string {
		var b strings.Builder
		for n := r.IntN(5); n >= 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	}
	type pair struct{ s, t string }
	seen := map[string]pair{}
	for i := 0; i < 50000; i++ {
		p := pair{gen(), gen()}
		name := PublicName(p.s, p.t)
		if !ValidPublicName(name) {
			t.Fatalf("PublicName(%q, %q) = %q: invalid", p.s, p.t, name)
		}
		if prev, ok := seen[name]; ok && prev != p {
			t.Fatalf("collision: %q and %q both give %q", prev, p, name)
		}
		seen[name] = p
	}
}

func FuzzPublicName(f *testing.F) {
	f.Add("github", "create_issue", "gitlab", "create_issue")
	f.Add("a_", "_b", "a", "__b")
	f.Fuzz(func(t *testing.T, s1, t1, s2, t2 string) {
		n1, n2 := PublicName(s1, t1), PublicName(s2, t2)
		if !ValidPublicName(n1) || !ValidPublicName(n2) {
			t.Fatalf("invalid names %q %q", n1, n2)
		}
		if (s1 != s2 || t1 != t2) && n1 == n2 {
			t.Fatalf("collision: (%q,%q) and (%q,%q) → %q", s1, t1, s2, t2, n1)
		}
	})
}
