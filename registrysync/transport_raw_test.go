package registrysync

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// rawResultServer is rawresult (serveRawChild) over streamable HTTP, without a session: it
// answers tools/call with the bytes of its argument "b64" as the result, in a JSON body or, with
// sse, as the one event of a text/event-stream.
type rawResultServer struct{ sse bool }

func (s rawResultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments struct {
				B64 string `json:"b64"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := string(m.ID)
	var line string
	switch m.Method {
	case "initialize":
		line = `{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"review","version":"1"}}}`
	case "tools/list":
		line = `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`
	case "tools/call":
		raw, _ := base64.StdEncoding.DecodeString(m.Params.Arguments.B64)
		line = `{"jsonrpc":"2.0","id":` + id + `,"result":` + string(raw) + `}`
	case "ping":
		line = `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`
	default:
		line = `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}`
	}
	if s.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: "+line+"\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, line)
}

// rawLegacySSE is rawResultServer over the legacy HTTP+SSE transport: GET /sse opens the
// stream (its endpoint event names /message), and each POST's answer is an event of it.
type rawLegacySSE struct {
	mu     sync.Mutex
	stream chan string
}

func (s *rawLegacySSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		ch := make(chan string, 16)
		s.mu.Lock()
		s.stream = ch
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: endpoint\ndata: /message?sessionId=1\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case line := <-ch:
				_, _ = io.WriteString(w, "event: message\ndata: "+line+"\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/message":
		rec := httptest.NewRecorder()
		rawResultServer{}.ServeHTTP(rec, r)
		w.WriteHeader(http.StatusAccepted)
		if line := rec.Body.String(); rec.Code == http.StatusOK && line != "" {
			s.mu.Lock()
			ch := s.stream
			s.mu.Unlock()
			ch <- line
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// rawResults are results as a server may write them, valid JSON or not, each answered to a
// tools/call over stdio (one line), over streamable HTTP in a JSON body, and as an event of a
// text/event-stream: the connector passes on the same result, or fails the call with the same
// code, whatever the transport. (None holds a raw CR or LF: a line and an event end there.)
var rawResults = []string{
	`{"content":[{"type":"text","text":"ok"}]}`,
	`{"content":[{"type":"text","text":"a` + "\xff" + `b"}]}`,             // invalid UTF-8
	`{"content":[{"type":"text","text":"\ud800x"}]}`,                      // lone surrogate
	`{"content":[{"type":"text","text":"` + "\u2028\u2029\ufeff" + `"}]}`, // raw line/paragraph separators, BOM
	`{"content":[{"type":"text","text":"\/\u0000\b\f"}]}`,
	`{"content":[],"structuredContent":{"big":1e400,"long":123456789012345678901234567890,"z":-0,"e":1E-7}}`,
	`{"content":[],"isError":false,"isError":true}`, // duplicate member
	`{"content":[],"structuredContent":{"x":NaN}}`,
	`{"content":[],"structuredContent":{"x":Infinity}}`,
	` {  "content" : [ { "type" : "text" ,	"text" : "s" } ] } `,
	`[1,2]`, `null`, `{}`, `"str"`, `42`, `true`,
	`{"content":[{"type":"text","text":"a` + "\t" + `b"}]}`, // raw control character in a string
	`{"content":[{"type":"text","text":"\x"}]}`,             // invalid escape
	`{"content":[],"structuredContent":{"deep":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`,
	`{"content":[],"structuredContent":{"n":1` + strings.Repeat("0", 5000) + `}}`,
	`{"content":"x"}`, `{"content":[{"type":"text"}]}`, `{"isError":"yes","content":[]}`, `{"content":[],"structuredContent":[1]}`,
	`{"content":[],"_meta":{"k":"v"},"extra":{"a":[1,2.50]}}`,
	`{"content":[{"type":"text","text":"x"}]`, // cut short
	`{"content":[]} trailing`,
	`{"content":[],"a":01}`, // leading zero
	`{"content":[],"a":.5}`,
	`{"content":[],"a":+1}`,
	`{"content":[],"a":'x'}`,
	`{"content":[],"a":"` + "\x00" + `"}`, // raw NUL
	`{"content":[],}`,                     // trailing comma
	`{"content":[{"type":"text","text":"\uD83D\uDE00 \u00e9"}]}`,
	// Members after the result (the answer's line is `{"jsonrpc","id","result":` RAW `}`).
	`{"content":[]},"error":{"code":-32000,"message":"both"}`,
	`null,"error":{"code":-32000,"message":"an error","data":{"x":1}}`,
	`{"content":[]},"error":"x"`,
	`{"content":[]},"error":null`,
	`{"content":[]},"jsonrpc":"1.0"`,
	`{"content":[]},"Result":{"content":[{"type":"text","text":"case"}]}`,
}

// brokenAt is where a "not valid JSON" message says the answer breaks and how it begins: the
// request's id is written "mcpstream-N" on stdio, a number over HTTP, so both differ.
var brokenAt = regexp.MustCompile(`( at byte \d+ of \d+)?; it begins .*; the call`)

// TestRawResultAcrossTransports: the same raw tools/call result over stdio and streamable HTTP
// (a JSON body, an event stream) and the legacy HTTP+SSE transport gives the same dispatch
// reply. An answer that is not valid
// JSON (a NaN, cut short, a raw control character) used to fail the call outcome_unknown over
// HTTP ("the connection failed": the executor retries a read-only tool's), with "unexpected nil
// response" from an event stream, where stdio fails it protocol_error at once.
//
// Left as it is: a "result": null is protocol_error on every transport, but its message differs
// (stdio: "the answer holds neither a result nor an error"; HTTP: "a result that is not a JSON
// object").
func TestRawResultAcrossTransports(t *testing.T) {
	jsonSrv := httptest.NewServer(rawResultServer{})
	t.Cleanup(jsonSrv.Close)
	sseSrv := httptest.NewServer(rawResultServer{sse: true})
	t.Cleanup(sseSrv.Close)
	legacySrv := httptest.NewServer(&rawLegacySSE{})
	t.Cleanup(legacySrv.Close)
	servers := []ServerConfig{rawServer(t, "raw-stdio", "rawresult"),
		{Name: "raw-json", Transport: TransportHTTP, URL: jsonSrv.URL + "/mcp"},
		{Name: "raw-events", Transport: TransportHTTP, URL: sseSrv.URL + "/mcp"},
		{Name: "raw-sse", Transport: TransportSSE, URL: legacySrv.URL + "/sse"}}
	for i := range servers {
		// (A call whose answer is dropped waits out its timeout: bounded.)
		servers[i].ProtocolVersion, servers[i].CallTimeout = "2025-11-25", 5*time.Second
	}
	h := run(t, nil, fastConfig(servers...))
	for _, s := range servers {
		rec := record(t, h.env, subjects.RegistryServer(s.Name))
		rec.wait(0, s.Name+" ready", isStatus(subjects.StatusReady, ""))
	}
	for _, raw := range rawResults {
		args, _ := json.Marshal(map[string]string{"b64": base64.StdEncoding.EncodeToString([]byte(raw))})
		var replies []string
		for _, s := range servers {
			r := h.m.Dispatch(context.Background(), s.Name, subjects.DispatchRequest{V: 1, Tool: "t", Arguments: args})
			got := "result " + string(r.Result)
			if r.Error != nil {
				got = "error " + r.Error.Code + ": " + brokenAt.ReplaceAllString(strings.ReplaceAll(r.Error.Message, s.Name, "SERVER"), "; it begins …; the call")
				if raw == `null` {
					got = "error " + r.Error.Code
				}
			}
			replies = append(replies, got)
		}
		for i, got := range replies[1:] {
			if got != replies[0] {
				t.Errorf("result %.200q:\n%s: %.600s\n%s: %.600s", raw, servers[i+1].Name, got, servers[0].Name, replies[0])
			}
		}
	}
}
