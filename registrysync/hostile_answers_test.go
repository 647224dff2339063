package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// scriptListEnv holds the result the script child answers every tools/list after its first
// with ("$N" in it replaced by the number of the answer: a new cursor each page).
const scriptListEnv = "MCPSTREAM_TEST_SCRIPT_LIST"

// scriptFirstList is what the script child (and scriptHTTP) answers its first tools/list with.
const scriptFirstList = `{"tools":[{"name":"t","inputSchema":{"type":"object"}},{"name":"u","inputSchema":{"type":"object"}}]}`

// serveScriptChild is the child of childEnv=script: a hand-written 2025-11-25 stdio server whose
// answers the test writes. Its first tools/list answers scriptFirstList, the later ones
// $MCPSTREAM_TEST_SCRIPT_LIST (scriptFirstList when unset). A tools/call with the argument
// "l" writes its lines, "$ID" replaced by the call's id, instead of an answer, then exits
// (closing its stdout) if the argument "exit" is true; without "l" it answers "ok".
func serveScriptChild() int {
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) {
		out.WriteString(s + "\n")
		out.Flush()
	}
	lists := 0
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					L    *string `json:"l"`
					Exit bool    `json:"exit"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" {
			continue
		}
		id := string(m.ID)
		switch m.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"script","version":"1"}}}`)
		case "notifications/initialized":
		case "ping":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
		case "tools/list":
			lists++
			res := scriptFirstList
			if l := os.Getenv(scriptListEnv); l != "" && lists > 1 {
				res = strings.ReplaceAll(l, "$N", strconv.Itoa(lists))
			}
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":` + res + `}`)
		case "tools/call":
			if m.Params.Arguments.L == nil {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`)
				continue
			}
			out.WriteString(strings.ReplaceAll(*m.Params.Arguments.L, "$ID", id))
			out.Flush()
			if m.Params.Arguments.Exit {
				return 0
			}
			out.WriteString("\n")
			out.Flush()
		default:
			if len(m.ID) > 0 {
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"no"}}`)
			}
		}
	}
	return 0
}

// hostileLists are list results a server may answer a re-list with, and the code the re-list
// must fail with ("" : it is published, with what it holds).
var hostileLists = []struct {
	name, result, code string
}{
	{"no tools member", `{}`, subjects.CodeMalformedResponse},
	{"tools an object", `{"tools":{}}`, subjects.CodeMalformedResponse},
	{"tools a string", `{"tools":"x"}`, subjects.CodeMalformedResponse},
	{"only a cursor", `{"nextCursor":"c$N"}`, subjects.CodeMalformedResponse},
	{"cursor a number", `{"tools":[],"nextCursor":5}`, subjects.CodeMalformedResponse},
	{"cursor an object", `{"tools":[],"nextCursor":{"p":2}}`, subjects.CodeMalformedResponse},
	{"cursor repeated", `{"tools":[{"name":"t","inputSchema":{"type":"object"}}],"nextCursor":"same"}`, subjects.CodeMalformedResponse},
	{"cursor endless", `{"tools":[{"name":"t$N","inputSchema":{"type":"object"}}],"nextCursor":"c$N"}`, subjects.CodeTooManyPages},
	{"result an array", `[]`, subjects.CodeMalformedResponse},
	{"result null", `null`, subjects.CodeMalformedResponse},
	// Answers that are no JSON-RPC response (the result, then members after it): mcp-go's stdio
	// transport dropped them, and the list waited for ListTimeout (list_failed).
	{"error code a string", `{"tools":[]},"error":{"code":"x","message":"m"}`, subjects.CodeMalformedResponse},
	{"error a number", `{"tools":[]},"Error":5`, subjects.CodeMalformedResponse},
	{"jsonrpc a number", `{"tools":[]},"jsonrpc":2`, subjects.CodeMalformedResponse},
}

// TestListWithoutItemsKeepsCatalog: a server that answered a re-list with {} (no "tools"
// member, which MCP requires) had it read as an empty list: a snapshot of no
// tools was published and every tool of the server left the catalog. Such a list, as every
// malformed one, fails with a stable code: nothing is published, the last list stays, and the
// server's status says why. (Lists whose items are wrong are published without those items:
// see TestHostileItemsRejected.)
func TestListWithoutItemsKeepsCatalog(t *testing.T) {
	cfg := fastConfig()
	for i, tc := range hostileLists {
		cfg.Servers = append(cfg.Servers, stdioServer(t, "hl"+strconv.Itoa(i), "script", scriptListEnv+"="+tc.result))
	}
	cfg.MaxPages = 5
	h := run(t, nil, cfg)
	for i, tc := range hostileLists {
		t.Run(tc.name, func(t *testing.T) {
			name := "hl" + strconv.Itoa(i)
			rec := record(t, h.env, subjects.RegistryServer(name))
			first := rec.wait(0, "first tools snapshot", isSnapshot(subjects.KindTools, nil))
			ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			rep := relist(t, h, name, subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
			if rep.Error == nil {
				t.Fatalf("re-list answered %+v, want an error", rep)
			}
			e := rec.wait(ready.seq, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
			if e.ev.Status.Code != tc.code {
				t.Errorf("status %s %q, want code %s", e.ev.Status.Code, e.ev.Status.Reason, tc.code)
			}
			for _, ev := range rec.all() {
				if ev.ev.Snapshot != nil && ev.seq != first.seq {
					t.Errorf("a malformed list was published: %s", ev.data)
				}
			}
			if seq := lastSeq(t, h.env, subjects.RegistrySnapshot(name, subjects.KindTools)); seq != first.seq {
				t.Errorf("the last tools snapshot is #%d, want the first list's #%d", seq, first.seq)
			}
		})
	}
}

// TestHostileItemsRejected: items without a name, with an inputSchema that is no object, and a
// name listed twice are left out each with its code; the rest of the list is published.
func TestHostileItemsRejected(t *testing.T) {
	list := `{"tools":[{"name":"t","inputSchema":{"type":"object"}},{"inputSchema":{"type":"object"}},` +
		`{"name":"s","inputSchema":"object"},{"name":"a","inputSchema":[]},{"name":"t","inputSchema":{"type":"object","properties":{}}},` +
		`{"name":"n","inputSchema":null},"tool",null]}`
	h := run(t, nil, fastConfig(stdioServer(t, "hi", "script", scriptListEnv+"="+list)))
	rec := record(t, h.env, subjects.RegistryServer("hi"))
	first := rec.wait(0, "first tools snapshot", isSnapshot(subjects.KindTools, nil))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if rep := relist(t, h, "hi", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}); rep.Error != nil {
		t.Fatalf("re-list: %+v", rep.Error)
	}
	snap := rec.wait(first.seq, "second snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if got := names(t, snap); !slices.Equal(got, []string{"t"}) {
		t.Errorf("items %v, want [t]", got)
	}
	var codes []string
	for _, r := range snap.Rejected {
		codes = append(codes, r.Code)
	}
	want := []string{
		subjects.CodeInvalidDefinition, subjects.CodeInvalidSchema, subjects.CodeInvalidSchema,
		subjects.CodeDuplicateName, subjects.CodeInvalidSchema, subjects.CodeInvalidDefinition, subjects.CodeInvalidDefinition,
	}
	if !slices.Equal(codes, want) {
		t.Errorf("rejected %+v, want codes %v", snap.Rejected, want)
	}
}

// hostileCalls are tools/call answers of a hostile server ("$ID" is the call's id) and the codes
// a dispatch of them may end with. Every one leaves the session serving later calls.
var hostileCalls = []struct {
	name, answer string
	codes        []string // "" : a result (status ok)
}{
	{"result an array", `{"jsonrpc":"2.0","id":$ID,"result":[1]}`, []string{subjects.CodeProtocolError}},
	{"result a string", `{"jsonrpc":"2.0","id":$ID,"result":"done"}`, []string{subjects.CodeProtocolError}},
	{"content a string", `{"jsonrpc":"2.0","id":$ID,"result":{"content":"done"}}`, []string{subjects.CodeProtocolError}},
	{"content an object", `{"jsonrpc":"2.0","id":$ID,"result":{"content":{"type":"text","text":"x"}}}`, []string{subjects.CodeProtocolError}},
	{"isError a string", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"boom"}],"isError":"true"}}`, []string{subjects.CodeProtocolError}},
	{"isError a number", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"boom"}],"isError":1}}`, []string{subjects.CodeProtocolError}},
	{"isError in another case", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"boom"}],"IsError":"yes"}}`, []string{subjects.CodeProtocolError}},
	// A content type of a later protocol version: passed on as the server sent it.
	{"unknown content type", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"hologram","data":"x"}]}}`, []string{""}},
	{"error code a string", `{"jsonrpc":"2.0","id":$ID,"error":{"code":"E42","message":"m"}}`, []string{subjects.CodeProtocolError}},
	{"error code a fraction", `{"jsonrpc":"2.0","id":$ID,"error":{"code":1.5,"message":"m"}}`, []string{subjects.CodeProtocolError}},
	{"error code huge", `{"jsonrpc":"2.0","id":$ID,"error":{"code":1e40,"message":"m"}}`, []string{subjects.CodeProtocolError}},
	// (stdio reads the result: what matters is that the call is not left waiting)
	{"jsonrpc not a string", `{"jsonrpc":2,"id":$ID,"result":{"content":[{"type":"text","text":"x"}]}}`, []string{subjects.CodeProtocolError, ""}},
	{"error not an object", `{"jsonrpc":"2.0","id":$ID,"error":"bad"}`, []string{subjects.CodeProtocolError}},
	{"error message huge", `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32000,"message":"` + strings.Repeat("m", 1<<20) + `"}}`, []string{subjects.CodeProtocolError}},
	{"notifications first", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":$ID,"progress":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n" +
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"late"}]}}`, []string{""}},
	{"answers to ids never sent", `{"jsonrpc":"2.0","id":"never-sent","result":{"content":[]}}` + "\n" +
		`{"jsonrpc":"2.0","id":987654321,"error":{"code":-1,"message":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"mine"}]}}`, []string{""}},
	// Only an answer to another id: nothing answers the call.
	{"wrong id only", `{"jsonrpc":"2.0","id":"mcpstream-424242","result":{"content":[]}}`, []string{subjects.CodeTimeout, subjects.CodeOutcomeUnknown}},
}

// checkHostileCalls runs hostileCalls against server, ready once, on h: each ends with a stable
// code and the next call is answered (checkHostileCall), and none changes its tools snapshot.
func checkHostileCalls(t *testing.T, h *harness, server string) {
	t.Helper()
	rec := record(t, h.env, subjects.RegistryServer(server))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snaps := lastSeq(t, h.env, subjects.RegistrySnapshot(server, subjects.KindTools))
	for _, tc := range hostileCalls {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]any{"l": tc.answer})
			checkHostileCall(t, h, server, args, tc.codes)
		})
	}
	if seq := lastSeq(t, h.env, subjects.RegistrySnapshot(server, subjects.KindTools)); seq != snaps {
		t.Errorf("hostile call answers changed the tools snapshot (#%d, was #%d)", seq, snaps)
	}
}

// TestHostileCallAnswersStdio: every hostile tools/call answer ends the dispatch with a stable
// code, and the next call on the session is answered.
func TestHostileCallAnswersStdio(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "hc", "script")))
	checkHostileCalls(t, h, "hc")
}

// checkHostileCall dispatches a call of tool t with args and checks its code is among codes,
// then that a plain call is answered.
func checkHostileCall(t *testing.T, h *harness, srv string, args json.RawMessage, codes []string) {
	t.Helper()
	// (a short timeout only where nothing answers the call)
	timeout := int64(20000)
	if slices.Contains(codes, subjects.CodeTimeout) {
		timeout = 1500
	}
	r := dispatch(t, h, srv, subjects.DispatchRequest{V: 1, Tool: "t", Arguments: args, TimeoutMs: timeout})
	plain := subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000}
	if srv == "hh" { // the fixture's
		plain = subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`), TimeoutMs: 20000}
	}
	code := ""
	if r.Error != nil {
		code = r.Error.Code
		if len(r.Error.Message) > 8<<10 {
			t.Errorf("the error message holds %d bytes", len(r.Error.Message))
		}
	}
	t.Logf("answered %q", code)
	if !slices.Contains(codes, code) {
		t.Errorf("got result %.200s, error %+v; want code in %q", r.Result, r.Error, codes)
	}
	if code == "" && !json.Valid(r.Result) {
		t.Errorf("result %q is not JSON", r.Result)
	}
	// The worker lives on (a reconnection allowed: a server that closed its stdout).
	waitUntil(t, "a plain call answered", func() bool {
		r := dispatch(t, h, srv, plain)
		return r.Error == nil
	})
}

// TestStdioClosedMidAnswer: a server that writes half an answer and closes its stdout ends the
// call with a stable code; the connector reconnects and serves the next call.
func TestStdioClosedMidAnswer(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "cut", "script")))
	rec := record(t, h.env, subjects.RegistryServer("cut"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"half`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}`, // whole, but no newline after it
		``,
	} {
		args, _ := json.Marshal(map[string]any{"l": answer, "exit": true})
		checkHostileCall(t, h, "cut", args, []string{subjects.CodeProtocolError, subjects.CodeOutcomeUnknown, ""})
	}
}

// scriptHTTP is a streamable HTTP server (mcp-go's, serving the fixture) whose tools/call
// POSTs are answered by the call's arguments: "l" is the body ("$ID" replaced by the call's id),
// "ct" its Content-Type (application/json when unset), "status" its HTTP status (200 when
// unset). A call without "l" goes to the fixture.
type scriptHTTP struct {
	next http.Handler
	mu   sync.Mutex
}

func (s *scriptHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					L      *string `json:"l"`
					CT     string  `json:"ct"`
					Status int     `json:"status"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.Params.Arguments.L != nil {
			a := m.Params.Arguments
			ct := cmpOrString(a.CT, "application/json")
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(cmpOrInt(a.Status, http.StatusOK))
			_, _ = io.WriteString(w, strings.ReplaceAll(*a.L, "$ID", string(m.ID)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.next.ServeHTTP(w, r)
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cmpOrInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// TestHostileCallAnswersHTTP: hostileCalls over streamable HTTP (a JSON body, and an SSE
// stream), and bodies that are no answer at all: HTML, an empty 200, JSON cut short.
func TestHostileCallAnswersHTTP(t *testing.T) {
	ts := httptest.NewServer(&scriptHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "hh", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("hh"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snaps := lastSeq(t, h.env, subjects.RegistrySnapshot("hh", subjects.KindTools))
	type call struct {
		name   string
		args   map[string]any
		codes  []string
		stream bool
	}
	var calls []call
	unknown := []string{subjects.CodeProtocolError, subjects.CodeOutcomeUnknown}
	for _, tc := range hostileCalls {
		codes := tc.codes
		if strings.Contains(tc.answer, "\n") {
			codes = unknown // several messages in a JSON body: not one JSON-RPC response
		}
		calls = append(calls, call{name: tc.name, args: map[string]any{"l": tc.answer}, codes: codes})
		var sse strings.Builder
		for line := range strings.SplitSeq(tc.answer, "\n") {
			sse.WriteString("event: message\ndata: " + line + "\n\n")
		}
		calls = append(calls, call{name: tc.name + " in a stream", args: map[string]any{"l": sse.String(), "ct": "text/event-stream"}, codes: tc.codes})
	}
	calls = append(calls,
		call{name: "html", args: map[string]any{"l": "<html><body>Bad gateway</body></html>", "ct": "text/html"}, codes: unknown},
		call{name: "json as html", args: map[string]any{"l": `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}`, "ct": "text/html; charset=utf-8"}, codes: append([]string{""}, unknown...)},
		call{name: "empty 200", args: map[string]any{"l": ""}, codes: unknown},
		call{name: "empty 200 no type", args: map[string]any{"l": "", "ct": " "}, codes: unknown},
		call{name: "cut short", args: map[string]any{"l": `{"jsonrpc":"2.0","id":$ID,"result":{"content":[`}, codes: unknown},
		call{name: "NaN", args: map[string]any{"l": `{"jsonrpc":"2.0","id":$ID,"result":{"content":[],"structuredContent":{"v":NaN}}}`}, codes: []string{subjects.CodeProtocolError}},
		call{name: "NaN in a stream", args: map[string]any{"l": "data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"v\":NaN}}\n\n", "ct": "text/event-stream"}, codes: unknown},
		call{name: "jsonrpc a number", args: map[string]any{"l": `{"jsonrpc":2,"id":$ID,"result":{"content":[]}}`}, codes: []string{subjects.CodeProtocolError}},
		call{name: "jsonrpc a number in a stream", args: map[string]any{"l": "data: {\"jsonrpc\":2,\"id\":$ID,\"result\":{\"content\":[]}}\n\n", "ct": "text/event-stream"}, codes: []string{subjects.CodeProtocolError}},
		call{name: "empty stream", args: map[string]any{"l": "", "ct": "text/event-stream"}, codes: unknown},
		call{name: "stream of garbage", args: map[string]any{"l": "data: {nope\n\n", "ct": "text/event-stream"}, codes: unknown},
		call{name: "202 to a request", args: map[string]any{"l": "", "status": 202}, codes: unknown},
	)
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			args, _ := json.Marshal(c.args)
			checkHostileCall(t, h, "hh", args, c.codes)
		})
	}
	if seq := lastSeq(t, h.env, subjects.RegistrySnapshot("hh", subjects.KindTools)); seq != snaps {
		t.Errorf("hostile call answers changed the tools snapshot (#%d, was #%d)", seq, snaps)
	}
}

// resultShapeByDecoding is what resultShapeProblem must agree with: a tools/call result whose
// isError or content encoding/json cannot decode (names in any case), or whose content holds an
// item that is not an object, is malformed.
func resultShapeByDecoding(raw []byte) bool {
	var r struct {
		IsError bool              `json:"isError"`
		Content []json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return false
	}
	for _, item := range r.Content {
		if item[0] != '{' {
			return false
		}
	}
	return true
}

func resultShapeCases() []string {
	return []string{
		`{"content":[{"type":"text","text":"ok"}]}`,
		`{"content":[],"isError":true}`,
		`{"content":null,"isError":null,"structuredContent":{"isError":"x","content":5}}`,
		`{"structuredContent":{}}`,
		`{}`,
		`{"content":[{"type":"hologram"}],"isError":false}`,
		`{"content":"x"}`,
		`{"content":{"type":"text"}}`,
		`{"content":[1]}`,
		`{"content":[{"type":"text"},null]}`,
		`{"content":[[]]}`,
		`{"isError":"true"}`,
		`{"isError":0}`,
		`{"ISERROR":"yes"}`,
		`{"IsError":{}}`,
		`{"is\u0045rror":"x"}`,
		`{"i\u017fError":"x"}`,
		`{"\u0131sError":"x"}`,
		`{"\u0130sError":"x"}`,
		`{"CONTENT":5}`,
		`{"cont\u0065nt":"x"}`,
		`{"content":[],"Content":7}`,
		`{"isError":true,"isError":"x"}`,
		// (of several content members encoding/json keeps the last one's items)
		`{"content":[1],"content":null}`,
		`{"content":[1],"content":[{"type":"text"}]}`,
		`{"content":[{"type":"text"}],"Content":[5]}`,
		`{"content":"x","content":[]}`,
		`{"content" : [ {"type":"text"} , "x" ] }`,
		` { "isError" : false , "content" : [ ] } `,
	}
}

// TestResultShape: resultShapeProblem finds the results encoding/json cannot read isError or
// content of (which the executor then took for a success), and no other.
func TestResultShape(t *testing.T) {
	for _, raw := range resultShapeCases() {
		want := resultShapeByDecoding([]byte(raw))
		if got := resultShapeProblem([]byte(raw)); (got == "") != want {
			t.Errorf("%s: problem %q, encoding/json reads it: %v", raw, got, want)
		}
	}
}

func FuzzResultShape(f *testing.F) {
	for _, raw := range resultShapeCases() {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || bytes.TrimSpace(raw)[0] != '{' {
			return // dispatch checks the result is an object first
		}
		want := resultShapeByDecoding(raw)
		if got := resultShapeProblem(raw); (got == "") != want {
			t.Fatalf("%q: problem %q, encoding/json reads it: %v", raw, got, want)
		}
	})
}

// TestHostileCallAnswersLegacySSE: hostileCalls over legacy HTTP+SSE, the answers on the
// session's one event stream.
func TestHostileCallAnswersLegacySSE(t *testing.T) {
	ts := httptest.NewServer(&rawSSEServer{mode: "script", out: make(chan string, 16)})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "hs", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"}))
	checkHostileCalls(t, h, "hs")
}

// TestTaskGetMalformedAnswer: over HTTP, a tasks/get answered with an "error" of the wrong
// shape was asked again (as after a failed connection) until the failures in a row ran out,
// then ended outcome_unknown; it is the server's broken protocol, as on stdio: protocol_error
// at once, the task cancelled.
func TestTaskGetMalformedAnswer(t *testing.T) {
	h, shim := runShim(t, "badget", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
		switch method {
		case "tools/call":
			return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
		case "tasks/get":
			return `{},"error":{"code":"E1","message":"m"}`, 0
		case "tasks/cancel":
			return `{"taskId":"t-1","status":"cancelled"}`, 0
		}
		return `{}`, 0
	})
	r := h.m.Dispatch(context.Background(), "badget", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError {
		t.Errorf("got %+v %s, want protocol_error", r.Error, r.Result)
	}
	waitUntil(t, "tasks/cancel of t-1", func() bool { return slices.Contains(shim.methods(), "tasks/cancel t-1") })
	gets := 0
	for _, m := range shim.methods() {
		if m == "tasks/get t-1" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("tasks/get sent %d times, want once: %v", gets, shim.methods())
	}
}

// TestTakeAgreesWithMCPGo: on a request's own event stream and on a legacy SSE stream, the
// event filter (sseRequests.take) never takes, nor replaces with a local answer, an answer
// mcp-go's transports decode, and replaces every one they cannot (jsonrpc and error of every
// shape, names in other cases and escaped, ids as a number, a float and a string): mcp-go drops
// those, and the call waited for its timeout — on a legacy stream one whose jsonrpc was not a
// string did, unparsed. (Of duplicate members the filter reads the last, and may pass an answer
// mcp-go then drops, as before.)
func TestTakeAgreesWithMCPGo(t *testing.T) {
	rpcs := []string{``, `"jsonrpc":"2.0",`, `"jsonrpc":2,`, `"jsonrpc":null,`, `"JSONRPC":2,`, `"\u006asonrpc":[],`, `"jsonrpc":{},`}
	errs := []string{``, `"error":{"code":-1,"message":"m"},`, `"error":"s",`, `"error":{"code":"x"},`, `"error":{"code":1.5},`,
		`"error":null,`, `"Error":5,`, `"\u0065rror":5,`, `"error":{"code":1,"message":"m","data":{"error":5}},`,
		`"error":{"code":1,"message":5},`, `"error":[],`, `"error":{"code":1e2},`}
	results := []string{``, `"result":{"error":5,"jsonrpc":5},`, `"result":5,`}
	n := 0
	for _, want := range []string{"7", ""} {
		for _, a := range rpcs {
			for _, e := range errs {
				for _, r := range results {
					for _, id := range []string{`7`, `7.0`, `"7"`} {
						data := `{` + a + e + r + `"id":` + id + `}`
						f := &sseRequests{src: io.NopCloser(strings.NewReader(""))}
						if want != "" {
							f.want, f.wantJSON = want, []byte(`7`)
						}
						taken := f.take([]byte("event: message\ndata: " + data + "\n\n"))
						local := strings.Contains(string(f.out), localMarker)
						var m transport.JSONRPCResponse
						decoded := json.Unmarshal([]byte(data), &m) == nil
						switch {
						case decoded && (taken || local):
							t.Errorf("stream of %q: %s: mcp-go decodes it, the filter took it (local answer: %v)", want, data, local)
						case !decoded && !local:
							t.Errorf("stream of %q: %s: mcp-go drops it, the filter passed it", want, data)
						}
						n++
					}
				}
			}
		}
	}
	t.Logf("%d answers", n)
}

// cutHTTP answers a tools/call whose argument "cut" is set with a 200 application/json whose
// body the connection cuts short after "cut" ("$ID" replaced by the call's id): framed by a
// Content-Length it does not reach, or chunked without its last chunk when "chunked" is set.
type cutHTTP struct{ next http.Handler }

func (s *cutHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Cut     *string `json:"cut"`
					Chunked bool    `json:"chunked"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.Params.Arguments.Cut != nil {
			part := strings.ReplaceAll(*m.Params.Arguments.Cut, "$ID", string(m.ID))
			head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(part)+100) + "\r\n\r\n" + part
			if m.Params.Arguments.Chunked {
				head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
					strconv.FormatInt(int64(len(part)), 16) + "\r\n" + part + "\r\n"
			}
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_, _ = io.WriteString(conn, head)
				_ = conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.next.ServeHTTP(w, r)
}

// TestHTTPBodyCutShortOutcomeUnknown: an answer whose connection failed mid-body (its
// Content-Length not reached, a chunked body without its last chunk) is outcome_unknown, never
// protocol_error as a whole body that is not a JSON-RPC response is: the call may have run, and
// the executor retries a read-only tool's unknown outcome. Cut anywhere: inside a string, a
// literal, a number, a member name, between members, after the whole object's last member.
func TestHTTPBodyCutShortOutcomeUnknown(t *testing.T) {
	ts := httptest.NewServer(&cutHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "hh", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("hh"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	whole := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}],"isError":false,"n":12.5e3}}`
	for _, cut := range []string{`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"o`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}],"isError":fal`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}],"isError":false,"n":12.`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"conte`, `{"jsonrpc":"2.0","id":$ID,`, `{`, whole[:len(whole)-1],
	} {
		for _, chunked := range []bool{false, true} {
			args, _ := json.Marshal(map[string]any{"cut": cut, "chunked": chunked})
			r := dispatch(t, h, "hh", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args, TimeoutMs: 20000})
			if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
				t.Errorf("cut after %q (chunked %v): got %s %+v, want outcome_unknown", cut, chunked, r.Result, r.Error)
			}
		}
	}
}
