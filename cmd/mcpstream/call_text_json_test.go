package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallTextThatIsJSON: a tool's text that is a JSON object other than its structuredContent
// is the text to print, not a serialization of the structured content. server-filesystem's
// read_text_file answers the file's text in content and {"content": text} in structuredContent
// (the shape below is what it sends): reading a JSON file printed that wrapper, the file's
// text escaped in it, instead of the file. A text that is the structured content's JSON (as
// server-memory's read_graph sends it, pretty-printed) still prints the structured content.
func TestCallTextThatIsJSON(t *testing.T) {
	file := `{"name": "x", "v": [1, 2]}` + "\n"
	text, _ := json.Marshal(file)
	res := subjects.CallResult{ID: "c-1", Tool: "fs__read_text_file", Status: subjects.CallOK, Result: json.RawMessage(
		`{"content":[{"type":"text","text":` + string(text) + `}],"structuredContent":{"content":` + string(text) + `}}`)}
	var out, errOut strings.Builder
	if err := printCallResult(&out, &errOut, res, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != file {
		t.Errorf("read_text_file of a JSON file printed %q; want the file's text %q", out.String(), file)
	}

	graph := `{"entities":[{"name":"a","entityType":"t","observations":["o"]}],"relations":[]}`
	pretty := "{\n  \"entities\": [\n    {\n      \"name\": \"a\",\n      \"entityType\": \"t\",\n      \"observations\": [\n        \"o\"\n      ]\n    }\n  ],\n  \"relations\": []\n}"
	text, _ = json.Marshal(pretty)
	res = subjects.CallResult{ID: "c-2", Tool: "memory__read_graph", Status: subjects.CallOK, Result: json.RawMessage(
		`{"content":[{"type":"text","text":` + string(text) + `}],"structuredContent":` + graph + `}`)}
	out.Reset()
	if err := printCallResult(&out, &errOut, res, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != pretty+"\n" {
		t.Errorf("read_graph printed %q; want its structured content, indented", out.String())
	}
}

// TestCallTextWithImage: server-everything's get-tiny-image answers a text and an image; text
// output printed the text alone, with no sign of the image. stdout keeps the text alone (it may
// be redirected to a file); stderr says what --json would show.
func TestCallTextWithImage(t *testing.T) {
	res := subjects.CallResult{ID: "c-1", Tool: "everything__get-tiny-image", Status: subjects.CallOK, Result: json.RawMessage(
		`{"content":[{"type":"text","text":"Here's the image you requested:"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"text","text":"The image above is the MCP logo."}]}`)}
	var out, errOut strings.Builder
	if err := printCallResult(&out, &errOut, res, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != "Here's the image you requested:\nThe image above is the MCP logo.\n" {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.Contains(errOut.String(), "1 non-text content block") || !strings.Contains(errOut.String(), "--json") {
		t.Errorf("stderr %q; want the image counted", errOut.String())
	}
}
