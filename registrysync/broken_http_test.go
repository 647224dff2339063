package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// initHTTP serves the fixture over streamable HTTP, but answers initialize with answer ($ID
// the request's id) of Content-Type ct.
type initHTTP struct {
	next       http.Handler
	answer, ct string
}

func (s *initHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
			w.Header().Set("Content-Type", s.ct)
			_, _ = io.WriteString(w, strings.ReplaceAll(s.answer, "$ID", string(m.ID)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.next.ServeHTTP(w, r)
}

// TestHandshakeMalformedAnswerHTTP: over streamable HTTP, an initialize answered with valid
// JSON that is not a JSON-RPC response (a "jsonrpc" that is no string) failed connect_failed,
// in a JSON body or an event, where one that is not valid JSON failed malformed_response (as
// the lists do for both, and stdio for the handshake).
func TestHandshakeMalformedAnswerHTTP(t *testing.T) {
	const result = `{"protocolVersion":"2025-11-25","capabilities":{"x":1},"serverInfo":{"name":"x","version":"1"}}`
	for _, c := range []struct{ name, answer, ct string }{
		{"shape in a body", `{"jsonrpc":2,"id":$ID,"result":` + result + `}`, "application/json"},
		{"shape in an event", "data: {\"jsonrpc\":2,\"id\":$ID,\"result\":" + result + "}\n\n", "text/event-stream"},
		{"error shape in a body", `{"jsonrpc":"2.0","id":$ID,"error":{"code":"E1","message":"m"}}`, "application/json"},
		{"broken in a body", `{"jsonrpc":"2.0","id":$ID,"result":` + strings.Replace(result, "1}", "NaN}", 1) + `}`, "application/json"},
		{"broken in an event", "data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":" + strings.Replace(result, "1}", "NaN}", 1) + "}\n\n", "text/event-stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(&initHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})), answer: c.answer, ct: c.ct})
			t.Cleanup(ts.Close)
			h := run(t, nil, fastConfig(ServerConfig{Name: "ini", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
			rec := record(t, h.env, subjects.RegistryServer("ini"))
			e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
			if e.ev.Status.Code != subjects.CodeMalformedResponse {
				t.Errorf("status %s (%s), want %s", e.ev.Status.Code, e.ev.Status.Reason, subjects.CodeMalformedResponse)
			}
		})
	}
}

// TestWellBehavedAnswersHTTP: answers that are valid JSON, however they are written, pass as
// they did before a JSON body was read and checked whole (cappedTransport); broken messages on
// a request's stream that answer no request of ours fail nothing.
func TestWellBehavedAnswersHTTP(t *testing.T) {
	ts := httptest.NewServer(&scriptHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "hh", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("hh"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	const answer = `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}]}}`
	big := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}}`
	ev := func(data string) string { return "event: message\ndata: " + data + "\n\n" }
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"charset", map[string]any{"l": answer, "ct": "application/json; charset=utf-8"}},
		{"type in capitals", map[string]any{"l": answer, "ct": "Application/JSON"}},
		{"whitespace around", map[string]any{"l": "\r\n \t" + answer + "\r\n\r\n  \n"}},
		{"202", map[string]any{"l": answer, "status": 202}},
		{"1 MiB", map[string]any{"l": big}},
		{"data on several lines", map[string]any{"ct": "text/event-stream",
			"l": "event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":$ID,\ndata: \"result\":{\"content\":[]}}\n\n"}},
		{"broken notification first", map[string]any{"ct": "text/event-stream",
			"l": ev(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":NaN}}`) + ev(answer)}},
		{"broken request of the same id first", map[string]any{"ct": "text/event-stream",
			"l": ev(`{"jsonrpc":"2.0","id":$ID,"method":"ping","params":{"x":NaN}}`) + ev(answer)}},
		{"broken answer to another id first", map[string]any{"ct": "text/event-stream",
			"l": ev(`{"jsonrpc":"2.0","id":987654,"result":{"x":NaN}}`) + ev(answer)}},
		{"big in a stream", map[string]any{"ct": "text/event-stream", "l": ev(big)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args, _ := json.Marshal(c.args)
			checkHostileCall(t, h, "hh", args, []string{""})
		})
	}
}

// TestBrokenAnswerRedactedHTTP: the start of a broken HTTP answer, which its local answer
// carries unredacted (brokenAnswerLocal), reaches the call's error and the log only redacted,
// also where it spells the secret with JSON escapes.
func TestBrokenAnswerRedactedHTTP(t *testing.T) {
	t.Parallel()
	const secret = "p&ss-Secret-9"
	ts := httptest.NewServer(&scriptHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "hh", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25",
		Headers: map[string]string{"Authorization": "Bearer " + secret}}))
	rec := record(t, h.env, subjects.RegistryServer("hh"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	for _, spelt := range []string{secret, `p\u0026ss-Secret-9`} {
		broken := `{"jsonrpc":"2.0","id":$ID,"result":{"t":"` + spelt + `","v":NaN}}`
		for _, args := range []map[string]any{{"l": broken}, {"l": "event: message\ndata: " + broken + "\n\n", "ct": "text/event-stream"}} {
			a, _ := json.Marshal(args)
			r := dispatch(t, h, "hh", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: a, TimeoutMs: 20000})
			if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "it begins") {
				t.Fatalf("got %+v %s, want protocol_error quoting how the answer begins", r.Error, r.Result)
			}
			if strings.Contains(r.Error.Message, "ss-Secret-9") {
				t.Errorf("the error holds the secret: %s", r.Error.Message)
			}
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ss-Secret-9") {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}

// TestBrokenEventIDRedactedLegacySSE: a legacy SSE event that is not valid JSON, an answer
// whose id (the server's choice, any) can be read, was logged with that id unredacted.
func TestBrokenEventIDRedactedLegacySSE(t *testing.T) {
	t.Parallel()
	const secret = "p&ss-Secret-9"
	ts := httptest.NewServer(&rawSSEServer{mode: "script", out: make(chan string, 16)})
	t.Cleanup(ts.Close)
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "hs", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25",
		Headers: map[string]string{"Authorization": "Bearer " + secret}}))
	rec := record(t, h.env, subjects.RegistryServer("hs"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	args, _ := json.Marshal(map[string]any{"l": `{"jsonrpc":"2.0","id":"` + secret + `","result":NaN}` + "\n" +
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}`})
	if r := dispatch(t, h, "hs", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: args, TimeoutMs: 20000}); r.Error != nil {
		t.Fatalf("got %+v, want the call's result", r.Error)
	}
	waitUntil(t, "the broken event logged", func() bool { return strings.Contains(logs.String(), "not valid JSON") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ss-Secret-9") {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}
