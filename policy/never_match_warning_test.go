package policy

import (
	"strings"
	"testing"
)

// TestWarningsPatternMatchesNothing: a glob without "__" is compared with the whole
// server__tool name (MatchTool), which always holds "__" with a server before it and a tool
// after. "github?" or "gith[u]b" can match no such name, yet New took them in silence (only a
// pattern without any glob character, "github", is refused): a deny written so denied nothing.
// And "[!r]" is the class of '!' and 'r' here (the negation is "[^r]"), also taken in silence.
// Both are now warned of; the configuration still loads.
func TestWarningsPatternMatchesNothing(t *testing.T) {
	never := []string{"github?", "gith[u]b", `githu\b?`, "a_?", "?_b", "a[_]b", "a?b", "a[^x]_", "[_]_b", "é?"}
	can := []string{"github*", "*", "a?_b", "a_?b", "a[_]_b", "a[^x]_b", "a??b", "?[_x]_?", "git*?", "github__?", "github__[!r]x"}
	cfg := &Config{Rules: []Rule{{Name: "r", Allow: []string{"files__*"}, Deny: append(append([]string{}, never...), can...)}}}
	if _, err := New(cfg); err != nil {
		t.Fatalf("New: %v (warned of, not refused: a configuration that loaded still loads)", err)
	}
	got := map[string]string{}
	for _, w := range Warnings(cfg) {
		got[w.Pattern] += w.String()
	}
	for _, pat := range never {
		if s := got[pat]; !strings.Contains(s, "matches no tool") || !strings.Contains(s, `rule 1 (r): deny pattern`) {
			t.Errorf("pattern %q: warnings %q, want one saying it matches no tool", pat, s)
		}
	}
	for _, pat := range can {
		if strings.Contains(got[pat], "matches no tool") {
			t.Errorf("pattern %q can match a server__tool name: warned %q", pat, got[pat])
		}
	}
	// Each pattern said to match nothing indeed matches none of these names, and each other
	// matches one of them: the warning is never wrong about a name it could have met.
	names := [][2]string{{"github", "x"}, {"a", "b"}, {"a_", "b"}, {"a", "_b"}, {"a-", "b"}, {"x", "b"}, {"gi", "x"}, {"github", "rx"}, {"github", "!x"}}
	for _, pat := range append(append([]string{}, never...), can...) {
		matched := false
		for _, n := range names {
			matched = matched || MatchTool(pat, n[0], n[1])
		}
		if warned := strings.Contains(got[pat], "matches no tool"); warned == matched {
			t.Errorf("pattern %q: warned it matches no tool %v, matched one of the names %v", pat, warned, matched)
		}
	}

	bang := &Config{Rules: []Rule{{Allow: []string{"*"}, Deny: []string{"github__[!r]*", `files__[\!x]*`, "files__[^r]*", "x[!_]_y"}}}}
	if _, err := New(bang); err != nil {
		t.Fatalf("New: %v", err)
	}
	got = map[string]string{}
	for _, w := range Warnings(bang) {
		got[w.Pattern] += w.String()
	}
	for pat, want := range map[string]bool{"github__[!r]*": true, `files__[\!x]*`: false, "files__[^r]*": false, "x[!_]_y": true} {
		if warned := strings.Contains(got[pat], `"[^...]"`); warned != want {
			t.Errorf("pattern %q: warnings %q; want a [! warning: %v", pat, got[pat], want)
		}
	}
}
