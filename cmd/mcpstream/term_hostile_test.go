package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// hostileText is what an untrusted MCP server may put in any text it lists: an erase-line and a
// carriage return (the rest overwrites the line), OSC sequences setting the window title and
// writing the clipboard, the C1 CSI, a bidi override, NUL, DEL; then ordinary non-ASCII text,
// which must reach the terminal intact.
const hostileText = "Reads files\x1b[2K\rSafe tool\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\u009b31m\u202egnp.exe\x00\x7f 读取文件 café"

// ordinaryText is the part of hostileText every text output must still show as is.
const ordinaryText = "读取文件 café"

// hostileRegistry publishes a ready server "hostile" whose tool, schemas, annotations, server
// description and rejected definitions all carry hostileText (and a byte of invalid UTF-8), and
// an unavailable server "down" whose status fields carry it.
func hostileRegistry(t *testing.T) *natstest.Env {
	t.Helper()
	env := natstest.Start(t)
	h, _ := json.Marshal(hostileText)
	// A byte of invalid UTF-8 inside the JSON strings, as a server's bytes may hold.
	hs := strings.Replace(string(h), "Reads", "Re\xffads", 1)
	tool := `{"name":"readFiles","title":` + hs + `,"description":` + hs +
		`,"inputSchema":{"type":"object","description":` + hs + `,"properties":{"path":{"type":"string","description":` + hs + `}}}` +
		`,"outputSchema":{"type":"object","description":` + hs + `}` +
		`,"annotations":{"title":` + hs + `,"readOnlyHint":true}}`
	sn := snapshot("hostile", subjects.KindTools, t0, []json.RawMessage{json.RawMessage(tool)})
	sn.Info.Description = hostileText
	sn.Rejected = []subjects.Rejected{{Name: hostileText, Code: subjects.CodeInvalidDefinition, Message: hostileText}}
	data, err := json.Marshal(sn)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, env.JS, subjects.RegistryStatus("hostile"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "hostile",
		Status: subjects.StatusReady, Description: hostileText, Transport: "stdio", At: t0})
	publish(t, env.JS, subjects.RegistrySnapshot("hostile", subjects.KindTools), data)
	publish(t, env.JS, subjects.RegistrySnapshot("down", subjects.KindTools), snapshot("down", subjects.KindTools, t0, tools("t")))
	publish(t, env.JS, subjects.RegistryStatus("down"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "down",
		Status: subjects.StatusUnavailable, Code: subjects.CodeConnectionLost, Reason: hostileText, Description: hostileText,
		Transport: hostileText, Protocol: hostileText, At: t0.Add(time.Second)})
	return env
}

// TestHostileDefinitionsForTerminal: every text output that shows what servers listed (search
// at each detail level, inspect, servers, servers --catalog) puts nothing a terminal acts on on
// the screen (no escape sequence, C1 control, bidi override, NUL, carriage return, invalid
// UTF-8) and keeps ordinary non-ASCII text; each --json output is valid JSON, as safe, whose
// strings keep the server's text.
func TestHostileDefinitionsForTerminal(t *testing.T) {
	env := hostileRegistry(t)
	serveCatalog(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	texts := [][]string{
		{"search", "read files"},
		{"search", "read files", "--detail", "full"},
		{"search", "read files", "--detail", "name"},
		{"search", "select:hostile__readFiles,down__t", "--all", "--detail", "full"},
		{"inspect", "hostile__readFiles"},
		{"inspect", "down__t"},
		{"servers"},
		{"servers", "--catalog"},
	}
	for _, args := range texts {
		out, errOut, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, errOut)
			continue
		}
		if r, ok := termClean(out + errOut); !ok {
			t.Errorf("%v: %U reaches the terminal:\n%q", args, r, out+errOut)
		}
		if args[len(args)-1] != "name" && !strings.Contains(out, ordinaryText) {
			t.Errorf("%v: the ordinary text %q is not shown intact:\n%s", args, ordinaryText, out)
		}
	}

	jsons := [][]string{
		{"search", "select:hostile__readFiles", "--detail", "full", "--json"},
		{"inspect", "hostile__readFiles", "--json"},
		{"servers", "--json"},
		{"servers", "--catalog", "--json"},
	}
	for _, args := range jsons {
		out, errOut, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, errOut)
			continue
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("%v: not JSON:\n%s", args, out)
			continue
		}
		if r, ok := termClean(out); !ok {
			t.Errorf("%v: %U reaches the terminal:\n%q", args, r, out)
		}
		// The JSON value keeps the server's text (the invalid byte read as U+FFFD).
		var v any
		_ = json.Unmarshal([]byte(out), &v)
		if !containsString(v, hostileText) && !containsString(v, strings.Replace(hostileText, "Reads", "Re\ufffdads", 1)) {
			t.Errorf("%v: the server's text is not kept in the JSON value:\n%s", args, out)
		}
	}
}

// containsString reports whether the decoded JSON value v holds the string s somewhere.
func containsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		for _, e := range x {
			if containsString(e, s) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if containsString(e, s) {
				return true
			}
		}
	}
	return false
}

// TestCallResultHostileForTerminal: what a tool answers (text, structured content, an error's
// message and path) reaches the terminal without anything it acts on, ordinary non-ASCII text
// intact; --json stays JSON, as safe, and keeps the value.
func TestCallResultHostileForTerminal(t *testing.T) {
	h, _ := json.Marshal(hostileText)
	hs := strings.Replace(string(h), "Reads", "Re\xffads", 1)
	results := map[string]subjects.CallResult{
		"text": {ID: "c-1", Tool: "hostile__readFiles", Status: subjects.CallOK,
			Result: json.RawMessage(`{"content":[{"type":"text","text":` + hs + `}]}`)},
		"structured": {ID: "c-2", Tool: "hostile__readFiles", Status: subjects.CallOK,
			Result: json.RawMessage(`{"content":[],"structuredContent":{"a":` + hs + `}}`)},
		"isError": {ID: "c-3", Tool: "hostile__readFiles", Status: subjects.CallOK,
			Result: json.RawMessage(`{"content":[{"type":"text","text":` + hs + `}],"isError":true}`)},
		"error": {ID: "c-4", Tool: "hostile__readFiles", Status: subjects.CallFailed,
			Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: hostileText, Path: hostileText}},
	}
	for name, res := range results {
		for _, asJSON := range []bool{false, true} {
			var out, errOut bytes.Buffer
			err := printCallResult(&out, &errOut, res, asJSON)
			var code exitCode
			if err != nil && !errors.As(err, &code) {
				t.Fatalf("%s: %v", name, err)
			}
			if r, ok := termClean(out.String() + errOut.String()); !ok {
				t.Errorf("%s json=%v: %U reaches the terminal:\n%q", name, asJSON, r, out.String()+errOut.String())
			}
			if asJSON {
				if !json.Valid(out.Bytes()) {
					t.Errorf("%s: --json output is not JSON: %s", name, out.String())
				}
				continue
			}
			if !strings.Contains(out.String()+errOut.String(), ordinaryText) {
				t.Errorf("%s: the ordinary text %q is not shown intact:\n%s%s", name, ordinaryText, out.String(), errOut.String())
			}
		}
	}
}

// TestEvalHostileForTerminal: eval retrieval's per-query lines and errors quote a query's id
// from the --queries file; it reaches the terminal with nothing a terminal acts on, as the query
// text does, ordinary non-ASCII text intact. The tools' text (descriptions, server
// descriptions) is never printed.
func TestEvalHostileForTerminal(t *testing.T) {
	dir := t.TempDir()
	h, _ := json.Marshal(hostileText)
	toolsPath := filepath.Join(dir, "tools.jsonl")
	os.WriteFile(toolsPath, []byte(`{"server":"files","server_description":`+string(h)+`,"name":"readFiles","description":`+string(h)+`}`+"\n"), 0o644)
	queries := filepath.Join(dir, "queries.jsonl")
	os.WriteFile(queries, []byte(`{"id":`+string(h)+`,"query":`+string(h)+`,"gold_groups":[["files::readFiles"]]}`+"\n"), 0o644)
	out, errOut, err := catRun(t, "eval", "retrieval", "--tools", toolsPath, "--queries", queries, "--per-query")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	if r, ok := termClean(out + errOut); !ok {
		t.Errorf("%U reaches the terminal:\n%q", r, out+errOut)
	}
	if strings.Count(out, ordinaryText) != 2 {
		t.Errorf("the ordinary text %q is not shown intact in the id and the query:\n%s", ordinaryText, out)
	}

	// A malformed gold id: the error names the query by its id.
	os.WriteFile(queries, []byte(`{"id":`+string(h)+`,"query":"read","gold_groups":[["no-separator"]]}`+"\n"), 0o644)
	_, _, err = catRun(t, "eval", "retrieval", "--tools", toolsPath, "--queries", queries)
	if err == nil {
		t.Fatal("a malformed gold id is accepted")
	}
	if r, ok := termClean(err.Error()); !ok || !strings.Contains(err.Error(), ordinaryText) {
		t.Errorf("error carries %U to the terminal (or loses the ordinary text): %q", r, err.Error())
	}
}
