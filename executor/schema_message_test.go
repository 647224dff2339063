package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpstream/mcpstream/subjects"
)

// An invalid_arguments message names the caller's member names where they fail, bounded and
// without control characters: a name of megabytes was echoed whole, once per failure (3 MiB
// of message for a 1.5 MiB name), and a name holding ESC or a newline reached the message raw.
// Error.Path keeps the exact pointer.
func TestSchemaMessagesBounded(t *testing.T) {
	huge := strings.Repeat("k", 1<<20)
	cases := []struct{ name, schema, args, path string }{
		{"huge additional property", `{"additionalProperties":false,"propertyNames":{"maxLength":8}}`,
			`{"` + huge + `":1}`, "/" + huge},
		{"huge location", `{"additionalProperties":{"type":"string"}}`,
			`{"` + huge + `":1}`, "/" + huge},
		{"controls in the location", `{"additionalProperties":{"type":"string"}}`,
			`{"a\u001b[2J\nb\u0085~/":1}`, "/a\x1b[2J\nb\u0085~0~1"},
		{"controls in a duplicate", `{}`, `{"a\u001b[2J":1,"a\u001b[2J":2}`, "/a\x1b[2J"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "s__t", InputSchema: json.RawMessage(c.schema)}
			e := validateArguments(tl, []byte(c.args))
			if e == nil || e.Code != subjects.CodeInvalidArguments {
				t.Fatalf("got %+v, want invalid_arguments", e)
			}
			if e.Path != c.path {
				t.Errorf("path %.80q, want %.80q", e.Path, c.path)
			}
			if len(e.Message) > 2048 {
				t.Errorf("message of %d bytes", len(e.Message))
			}
			if strings.ContainsFunc(e.Message, unicode.IsControl) {
				t.Errorf("message holds control characters: %q", e.Message)
			}
		})
	}
}
