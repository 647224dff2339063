package policy

import "testing"

// TestEmptyPatternMessage: an empty pattern (allow: [""], a value left out of a list) was
// refused as one with no tool part, suggesting the pattern "__*" for "every tool of server ":
// nonsense to act on. It is refused as empty.
func TestEmptyPatternMessage(t *testing.T) {
	_, err := New(&Config{Rules: []Rule{{Name: "r", Deny: []string{""}}}})
	want := `invalid policy: rule 1 (r): empty pattern: patterns are server__tool globs such as "github__*"`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
