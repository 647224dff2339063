package executor

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/testdeps"
)

// Calls through the executor to the real MCP servers from npm the tests install (pinned in
// testdeps/package.json, `npm ci --prefix testdeps`): what the caller gets is what the server
// sent.

// npmServer returns the entry point of an installed npm MCP server (testdeps.NPMServer).
func npmServer(t *testing.T, pkg string) string { return testdeps.NPMServer(t, pkg) }

// npmResult is the part of a CallToolResult these tests read.
type npmResult struct {
	Content []struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Data        string          `json:"data"`
		MimeType    string          `json:"mimeType"`
		Annotations json.RawMessage `json:"annotations"`
		Resource    struct {
			URI  string `json:"uri"`
			Blob string `json:"blob"`
		} `json:"resource"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// waitNPMReady waits until the executor knows public and its server is ready: a connector
// publishes a session's lists before its ready status, and an HTTP server still starting failed
// a first attempt (unavailable until ready).
func waitNPMReady(r *rig, public string) {
	r.t.Helper()
	r.waitTool(public)
	server, _, _ := strings.Cut(public, "__")
	waitFor(r.t, "server "+server+" ready", func() bool {
		st, _, _ := r.ex.reg.view.ServerStatus(server)
		return st == subjects.StatusReady
	})
}

func callNPM(t *testing.T, r *rig, id, tool, args string, timeoutMs int64) (subjects.CallResult, npmResult) {
	t.Helper()
	res := r.call("local", tool, args, func(q *subjects.CallRequest) { q.ID, q.TimeoutMs = id, timeoutMs })
	var out npmResult
	if res.Status == subjects.CallOK {
		if err := json.Unmarshal(res.Result, &out); err != nil {
			t.Errorf("%s: result %v: %s", tool, err, res.Result)
		}
	}
	return res, out
}

// server-everything, server-filesystem and server-memory over stdio, one of each for the test:
// text byte for byte, image and embedded blob content, content annotations, structuredContent
// checked against the real outputSchemas, tool errors, a host secret the child never sees, a
// sampling tool the server does not offer to a host without the capability, a result over the
// size limit and a call past its deadline, each leaving the session usable.
func TestNPMCallResults(t *testing.T) {
	everything := npmServer(t, "server-everything")
	filesystem := npmServer(t, "server-filesystem")
	memory := npmServer(t, "server-memory")
	const hostSecret = "host-only-Pa55w0rd-9f8e7d"
	t.Setenv("MCPSTREAM_TEST_HOST_TOKEN", hostSecret) // in the executor's environment, not the children's
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 5<<16) // 5 MiB: its result is over 4 MiB
	for name, data := range map[string]string{"hello.txt": "hello", "big.txt": big} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stdio := func(name string, args ...string) registrysync.ServerConfig {
		return registrysync.ServerConfig{Name: name, Transport: registrysync.TransportStdio, Command: "node", Args: args, CallTimeout: 30 * time.Second}
	}
	mem := stdio("memory", memory)
	mem.Env = map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}
	r := startRig(t, rigOptions{servers: []string{}, extra: []registrysync.ServerConfig{
		stdio("everything", everything, "stdio"), stdio("fs", filesystem, dir), mem,
	}})
	for _, tool := range []string{"everything__echo", "fs__read_text_file", "memory__read_graph"} {
		waitNPMReady(r, tool)
	}

	// Text, byte for byte as Node wrote it: U+2028 and <&> unescaped, an escaped quote.
	res, _ := callNPM(t, r, "echo", "everything__echo", `{"message":"ü \u2028 <&> 😀 \"q\""}`, 0)
	if want := `{"content":[{"type":"text","text":"Echo: ü ` + "\u2028" + ` <&> 😀 \"q\""}]}`; string(res.Result) != want {
		t.Errorf("echo: %+v\n got %s\nwant %s", res.Error, res.Result, want)
	}

	// The child's environment is the minimal one: the host's credentials are not in it.
	res, out := callNPM(t, r, "env", "everything__get-env", `{}`, 0)
	if res.Status != subjects.CallOK || len(out.Content) != 1 || !strings.Contains(out.Content[0].Text, `"PATH"`) ||
		strings.Contains(string(res.Result), "MCPSTREAM_TEST_HOST_TOKEN") || strings.Contains(string(res.Result), hostSecret) {
		t.Errorf("get-env: %+v %s", res.Error, res.Result)
	}

	res, out = callNPM(t, r, "image", "everything__get-tiny-image", `{}`, 0)
	if res.Status != subjects.CallOK || len(out.Content) < 2 || out.Content[1].Type != "image" || out.Content[1].MimeType != "image/png" {
		t.Fatalf("get-tiny-image: %+v %.300s", res.Error, res.Result)
	}
	if png, err := base64.StdEncoding.DecodeString(out.Content[1].Data); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("get-tiny-image: data is not a base64 PNG (%v)", err)
	}

	res, out = callNPM(t, r, "annotated", "everything__get-annotated-message", `{"messageType":"error"}`, 0)
	if res.Status != subjects.CallOK || len(out.Content) == 0 || string(out.Content[0].Annotations) != `{"audience":["user","assistant"],"priority":1}` {
		t.Errorf("get-annotated-message: %+v %s", res.Error, res.Result)
	}

	res, out = callNPM(t, r, "blob", "everything__get-resource-reference", `{"resourceType":"Blob","resourceId":2}`, 0)
	var blob []byte
	if res.Status == subjects.CallOK && len(out.Content) > 1 {
		blob, _ = base64.StdEncoding.DecodeString(out.Content[1].Resource.Blob)
	}
	if out.Content == nil || out.Content[1].Type != "resource" || !strings.HasPrefix(string(blob), "Resource 2: ") {
		t.Errorf("get-resource-reference: %+v %s", res.Error, res.Result)
	}

	// outputSchema declared: the structuredContent the server sends passes the executor's check.
	res, out = callNPM(t, r, "structured", "everything__get-structured-content", `{"location":"Chicago"}`, 0)
	if res.Status != subjects.CallOK || !bytes.Contains(out.StructuredContent, []byte(`"temperature":`)) {
		t.Errorf("get-structured-content: %+v %s", res.Error, res.Result)
	}
	res, out = callNPM(t, r, "entities", "memory__create_entities", `{"entities":[{"name":"a","entityType":"t","observations":["o"]}]}`, 0)
	if res.Status != subjects.CallOK || out.IsError {
		t.Errorf("create_entities: %+v %s", res.Error, res.Result)
	}
	res, out = callNPM(t, r, "graph", "memory__read_graph", `{}`, 0)
	if want := `{"entities":[{"name":"a","entityType":"t","observations":["o"]}],"relations":[]}`; res.Status != subjects.CallOK || string(out.StructuredContent) != want {
		t.Errorf("read_graph: %+v %s", res.Error, res.Result)
	}
	res, out = callNPM(t, r, "hello", "fs__read_text_file", `{"path":`+strconv.Quote(filepath.Join(dir, "hello.txt"))+`}`, 0)
	if res.Status != subjects.CallOK || string(out.StructuredContent) != `{"content":"hello"}` {
		t.Errorf("read_text_file: %+v %s", res.Error, res.Result)
	}
	// A tool error has no structuredContent and need not match the outputSchema.
	res, out = callNPM(t, r, "outside", "fs__read_text_file", `{"path":"/etc/passwd"}`, 0)
	if res.Status != subjects.CallOK || !out.IsError || !strings.Contains(out.Content[0].Text, "outside allowed directories") {
		t.Errorf("read_text_file outside the allowed directory: %+v %s", res.Error, res.Result)
	}

	// The host declares no sampling capability: the server does not offer its sampling tool,
	// and a call to it is answered at once, never left waiting for a sampling reply.
	if res, _ = callNPM(t, r, "sampling", "everything__trigger-sampling-request", `{"prompt":"hi"}`, 0); res.Error == nil || res.Error.Code != subjects.CodeNotFound {
		t.Errorf("trigger-sampling-request: %+v %s", res.Error, res.Result)
	}

	if res, _ = callNPM(t, r, "big", "fs__read_text_file", `{"path":`+strconv.Quote(filepath.Join(dir, "big.txt"))+`}`, 0); res.Error == nil || res.Error.Code != subjects.CodeResultTooLarge {
		t.Errorf("read_text_file of 5 MiB: %+v", res.Error)
	}
	if res, _ = callNPM(t, r, "late", "everything__trigger-long-running-operation", `{"duration":5,"steps":5}`, 300); res.Error == nil || res.Error.Code != subjects.CodeTimeout {
		t.Errorf("long-running operation past its deadline: %+v %s", res.Error, res.Result)
	}
	for _, c := range [][2]string{{"everything__echo", `{"message":"still there"}`}, {"fs__list_allowed_directories", `{}`}} {
		if res, _ = callNPM(t, r, "after-"+c[0], c[0], c[1], 0); res.Status != subjects.CallOK {
			t.Errorf("%s after the too-large result and the timeout: %+v", c[0], res.Error)
		}
	}
}

// server-everything over streamable HTTP: gzip-file-as-resource fetches 1 MiB of random bytes
// from a local server and answers them gzipped, base64 in an embedded resource: they come back
// byte for byte (the answer read whole off the HTTP response). (Over 4 MiB a result is
// result_too_large whatever the transport: TestNPMCallResults.)
func TestNPMCallResultsStreamableHTTP(t *testing.T) {
	everything := npmServer(t, "server-everything")
	file := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(file)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(file) }))
	defer hs.Close()

	base := startEverythingHTTP(t, everything, "streamableHttp")
	// The connector retries until the server listens (its first attempt may fail).
	r := startRig(t, rigOptions{servers: []string{}, extra: []registrysync.ServerConfig{{Name: "everything",
		Transport: registrysync.TransportHTTP, URL: base + "/mcp", CallTimeout: 30 * time.Second}}})
	waitNPMReady(r, "everything__gzip-file-as-resource")

	res, out := callNPM(t, r, "gzip", "everything__gzip-file-as-resource", `{"name":"a.gz","data":"`+hs.URL+`/a","outputType":"resource"}`, 0)
	if res.Status != subjects.CallOK || len(out.Content) != 1 || out.Content[0].Type != "resource" {
		t.Fatalf("gzip-file-as-resource: %+v %.300s", res.Error, res.Result)
	}
	gz, err := base64.StdEncoding.DecodeString(out.Content[0].Resource.Blob)
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, file) {
		t.Errorf("blob: %d bytes (%v), not the %d fetched", len(got), err, len(file))
	}
}
