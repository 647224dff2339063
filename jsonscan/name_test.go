package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestNameNotAString: Name reports false for text that is not a JSON string, as its doc says,
// and otherwise decodes as encoding/json does. Its fast path (no '\' nor byte >= 0x80) took
// any such text for a quoted one and cut its first and last bytes: "ab" was the name "", and
// `null` the name "ul", `"a"b"` the name `a"b`, a raw control byte passed, all with true.
func TestNameNotAString(t *testing.T) {
	for _, raw := range []string{
		`ab`, `null`, `12`, `""x`, `x""`, `"a"b"`, `"a`, `a"`, `" "" "`, "\"a\nb\"", "\"\x00\"", `"a" `, ` "a"`,
		`"a\"`, `{}`, `[]`, `"é`, `"\u00e9"x`,
	} {
		if name, ok := Name([]byte(raw)); ok {
			t.Errorf("Name(%q) = %q, true; want false (not a JSON string)", raw, name)
		}
	}
	for _, raw := range []string{`""`, `"a"`, `"search_tools"`, `"a\"b"`, `"\u0073x"`, `"é"`, "\"\xff\"", `"a b/c"`, `"\\"`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if name, ok := Name([]byte(raw)); !ok || name != want {
			t.Errorf("Name(%q) = %q, %v; want %q, true", raw, name, ok, want)
		}
	}
}
