package redact

import (
	"runtime"
	"strings"
	"testing"
)

// Keys that differ only in how a secret is spelled in them (as is, in base64, percent- or
// JSON-escaped) become one key once redacted: the document redacted is the same whatever the
// order a map is walked in (same input, same output), and redacting it again changes nothing.
func TestJSONKeysThatRedactAlikeAreStable(t *testing.T) {
	v := New("hunter22")
	raw := []byte(`{"a":{"hunter22":1,"aHVudGVyMjI=":2,"hunt%65r22":3,"hunt\u0065r22x":4,"hunt\u0065r22":5}}`)
	first, changed := v.JSON(raw)
	if !changed {
		t.Fatalf("JSON(%s) changed nothing", raw)
	}
	for i := range 200 {
		out, _ := v.JSON(raw)
		if string(out) != string(first) {
			t.Fatalf("run %d: JSON(%s) = %s, then %s", i, raw, first, out)
		}
		if w := v.Walk(mustDecode(t, raw), nil); i < 50 {
			enc, _ := Encode(w)
			if string(enc) != string(first) {
				t.Fatalf("run %d: Walk = %s, JSON = %s", i, enc, first)
			}
		}
	}
	if again, changed := v.JSON(first); changed {
		t.Errorf("JSON is not idempotent: %s, then %s", first, again)
	}
}

func mustDecode(t *testing.T, raw []byte) any {
	t.Helper()
	doc, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A text that is a secret over and over (a tool that echoes a secret in a loop, percent-escaped
// or not) is redacted in memory that follows the text's size: overlapping matches go into one
// span as they are found, not one span each (16 bytes a byte of text, sorted afterwards).
func TestStringRepeatedSecretMemory(t *testing.T) {
	v := New("AAAAAAAA")
	const n = 1 << 20
	for name, s := range map[string]string{
		"plain":   strings.Repeat("A", n),
		"percent": strings.Repeat("%41", n/3),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out := v.String(s)
		runtime.ReadMemStats(&after)
		if out != Placeholder {
			t.Errorf("%s: String = %.40q…, want %q", name, out, Placeholder)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12*n {
			t.Errorf("%s: String of %d bytes allocated %d bytes", name, len(s), alloc)
		}
	}
}
