package indexer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzToolDef: any definition a server lists becomes a search document and a one-line summary
// without a panic; the summary is one valid UTF-8 line of at most maxLineBytes, free of control
// characters.
func FuzzToolDef(f *testing.F) {
	f.Add(`{"name":"get_document","title":"Get","description":"Reads one.\nMore.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}}},"annotations":{"readOnlyHint":true,"destructiveHint":true}}`)
	f.Add(`{"name":1,"description":["x"],"inputSchema":"nope","annotations":{"title":"T","idempotentHint":"true"}}`)
	f.Add(`{"description":"\u0000\u001b[31mred\r\nsecond","annotations":null}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		d := parseDef(json.RawMessage(raw))
		if d.Hints.Destructive && d.Hints.ReadOnly {
			t.Fatalf("a read-only tool is labelled destructive: %s", raw)
		}
		_ = searchDoc("s__t", "s", "server", d)
		line := oneLine(d.Description)
		if len(line) > maxLineBytes || !utf8.ValidString(line) || strings.ContainsAny(line, "\r\n") {
			t.Fatalf("summary %q of %q", line, d.Description)
		}
		for _, r := range line {
			if unicode.IsControl(r) {
				t.Fatalf("control character %U in summary %q", r, line)
			}
		}
	})
}
