package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallStructuredWithImage: `call --help` says text output counts on stderr the content
// blocks it leaves out (an image...). A result whose structuredContent is printed (no text, or a
// text that is its JSON) beside an image printed the structured content alone, with no sign of
// the image; it is counted on stderr as beside a text. stdout is unchanged.
func TestCallStructuredWithImage(t *testing.T) {
	img := `{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`
	for name, content := range map[string]string{
		"no text":               `[` + img + `]`,
		"text that is its JSON": `[{"type":"text","text":"{\"total\":2}"},` + img + `]`,
	} {
		res := subjects.CallResult{ID: "c-1", Tool: "x__chart", Status: subjects.CallOK, Result: json.RawMessage(
			`{"content":` + content + `,"structuredContent":{"total":2}}`)}
		var out, errOut strings.Builder
		if err := printCallResult(&out, &errOut, res, false); err != nil {
			t.Fatal(err)
		}
		if out.String() != "{\n  \"total\": 2\n}\n" {
			t.Errorf("%s: stdout %q; want the structured content", name, out.String())
		}
		if !strings.Contains(errOut.String(), "1 non-text content block") || !strings.Contains(errOut.String(), "--json") {
			t.Errorf("%s: stderr %q; want the image counted", name, errOut.String())
		}
	}
}
