package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallWrappedResultNoNote: the MCP Python SDK (FastMCP) answers a tool returning a str,
// a number or a list with its value as text (one block per item of a list) and the same value
// in structuredContent as {"result": VALUE}. The text is all there is to see: the note that
// --json shows a structuredContent was noise on every such call.
func TestCallWrappedResultNoNote(t *testing.T) {
	for _, r := range []string{
		`{"content":[{"type":"text","text":"3"}],"structuredContent":{"result":3}}`,
		`{"content":[{"type":"text","text":"hello"}],"structuredContent":{"result":"hello"}}`,
		`{"content":[{"type":"text","text":"[\n  1,\n  2\n]"}],"structuredContent":{"result":[1,2]}}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"structuredContent":{"result":["a","b"]}}`,
		`{"content":[{"type":"text","text":"{\"x\": 1}"},{"type":"text","text":"7"}],"structuredContent":{"result":[{"x":1},7]}}`,
	} {
		res := subjects.CallResult{ID: "c-1", Tool: "py__tool", Status: subjects.CallOK, Result: json.RawMessage(r)}
		var out, errOut strings.Builder
		if err := printCallResult(&out, &errOut, res, false); err != nil || errOut.Len() != 0 {
			t.Errorf("%s: %v, stderr %q; want nothing on stderr (the text is the structured result)", r, err, errOut.String())
		}
	}
	// A text that differs from the wrapped value keeps the note.
	for _, r := range []string{
		`{"content":[{"type":"text","text":"3 items"}],"structuredContent":{"result":3}}`,
		`{"content":[{"type":"text","text":"a"}],"structuredContent":{"result":["a","b"]}}`,
		`{"content":[{"type":"text","text":"3"}],"structuredContent":{"result":3,"more":[1]}}`,
	} {
		res := subjects.CallResult{ID: "c-1", Tool: "py__tool", Status: subjects.CallOK, Result: json.RawMessage(r)}
		var out, errOut strings.Builder
		if err := printCallResult(&out, &errOut, res, false); err != nil || !strings.Contains(errOut.String(), "structuredContent") {
			t.Errorf("%s: %v, stderr %q; want the structuredContent note", r, err, errOut.String())
		}
	}
}

// TestHelpNeverRunsTheCommand: `help X ARGS` runs X with ARGS and --help, so an ARGS holding
// "--" (which ends the flags) made --help a positional argument: `help search -- x` searched
// for "x --help" (connecting to NATS), `help up --` refused "--help" as an argument. help only
// prints a usage.
func TestHelpNeverRunsTheCommand(t *testing.T) {
	t.Setenv("MCPSTREAM_NATS", "nats://127.0.0.1:1")
	for _, args := range [][]string{{"help", "search", "--", "x"}, {"help", "call", "--"}, {"help", "policy", "check", "--"}} {
		out, errOut, err := runCmd(t, context.Background(), args...)
		if err != nil || !strings.Contains(out, "Usage: mcpstream "+args[1]) {
			t.Errorf("%q: %v, stdout %.80q, stderr %q; want the usage", args, err, out, errOut)
		}
	}
}
