package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// rawHTTPServer is a hand-written legacy streamable HTTP MCP server (2025-11-25) whose GET
// stream carries what get writes, and whose tools/call answer is what call writes (nil: a
// plain result). The JSON-RPC messages the client POSTs are recorded; answers to the server's
// own requests (a POST with no method) are held until the client gives up when holdAnswers
// is set.
type rawHTTPServer struct {
	get         func(w io.Writer, flush func(), done <-chan struct{})
	call        func(w http.ResponseWriter, id string, n int)
	holdAnswers bool
	listID      string // the id tools/list is answered with ("": the request's)

	calls atomic.Int32
	mu    sync.Mutex
	msgs  []map[string]json.RawMessage
}

func (s *rawHTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flush := func() { w.(http.Flusher).Flush() }
		flush()
		if s.get != nil {
			s.get(w, flush, r.Context().Done())
		}
		<-r.Context().Done()
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	var method string
	_ = json.Unmarshal(m["method"], &method)
	id := string(m["id"])
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	}
	switch {
	case method == "":
		if s.holdAnswers {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case method == "initialize":
		w.Header().Set("Mcp-Session-Id", "s-1")
		answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"raw-http","version":"1"}}`)
	case len(m["id"]) == 0:
		w.WriteHeader(http.StatusAccepted) // a notification
	case method == "ping":
		answer(`{}`)
	case method == "tools/list":
		if s.listID != "" {
			id = s.listID
		}
		answer(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
	case method == "tools/call":
		n := int(s.calls.Add(1))
		if s.call != nil {
			s.call(w, id, n)
			return
		}
		answer(`{"content":[{"type":"text","text":"ok"}]}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, id)
	}
}

// answers returns the answers the client posted to the server's requests, by request id.
func (s *rawHTTPServer) answers() map[string]map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]json.RawMessage{}
	for _, m := range s.msgs {
		if _, isReq := m["method"]; !isReq && len(m["id"]) > 0 {
			out[string(m["id"])] = m
		}
	}
	return out
}

func startRawHTTP(t *testing.T, name string, s *rawHTTPServer) *harness {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: name, Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer(name))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	return h
}

// TestHTTPServerRequestsAnswered: over streamable HTTP, requests the server sends (on the GET
// stream) are answered as on stdio and legacy SSE: ping with an empty result, every method of a
// capability the connector does not declare (sampling, elicitation, roots) and unknown methods
// with -32601 (method not found). mcp-go answered sampling, elicitation and roots with -32603
// ("no sampling handler configured": an internal error of the client's).
func TestHTTPServerRequestsAnswered(t *testing.T) {
	t.Parallel()
	reqs := map[string]string{
		`"p"`: "ping", `"s"`: "sampling/createMessage", `"e"`: "elicitation/create",
		`"r"`: "roots/list", `"u"`: "no/such/method",
	}
	srv := &rawHTTPServer{get: func(w io.Writer, flush func(), _ <-chan struct{}) {
		for id, method := range reqs {
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":%q,\"params\":{}}\n\n", id, method)
		}
		flush()
	}}
	startRawHTTP(t, "rawhttp", srv)
	waitUntil(t, "an answer to every request of the server", func() bool { return len(srv.answers()) == len(reqs) })
	for id, m := range srv.answers() {
		if reqs[id] == "ping" {
			if string(m["result"]) != "{}" {
				t.Errorf("ping answered %v, want an empty result", m)
			}
			continue
		}
		var e struct{ Code int }
		if json.Unmarshal(m["error"], &e) != nil || e.Code != -32601 {
			t.Errorf("%s answered %s %s, want error -32601", reqs[id], m["error"], m["result"])
		}
	}
}

// TestHTTPServerRequestFloodBounded: a streamable HTTP server flooding requests on its GET
// stream while it never takes the answers made mcp-go answer each on a goroutine of its own,
// each holding a POST open for up to 30 s: goroutines (and connections) grew without bound.
func TestHTTPServerRequestFloodBounded(t *testing.T) {
	srv := &rawHTTPServer{holdAnswers: true}
	var sent atomic.Int64
	srv.get = func(w io.Writer, flush func(), done <-chan struct{}) {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, err := fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-%d\",\"method\":\"sampling/createMessage\"}\n\n", i); err != nil {
				return
			}
			flush()
			sent.Add(1)
		}
	}
	base := runtime.NumGoroutine()
	startRawHTTP(t, "rawflood", srv)
	time.Sleep(2 * time.Second)
	if n := runtime.NumGoroutine(); n > base+500 {
		t.Errorf("%d goroutines (%d before) after 2s of a server flooding %d requests", n, base, sent.Load())
	}
}

// TestHTTPCallAnswerWithAnotherID: a streamable HTTP server (a gateway, say) that answers a
// tools/call with the id of another request — a late answer to an earlier call that timed
// out — had that answer taken as the call's result: mcp-go never compares ids on HTTP.
func TestHTTPCallAnswerWithAnotherID(t *testing.T) {
	t.Parallel()
	srv := &rawHTTPServer{call: func(w http.ResponseWriter, id string, n int) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%q,"result":{"content":[{"type":"text","text":"the answer to another call"}]}}`, "other-"+id)
	}}
	h := startRawHTTP(t, "rawid", srv)
	r := h.m.Dispatch(context.Background(), "rawid", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
	if r.Error == nil || strings.Contains(string(r.Result), "another call") {
		t.Fatalf("tools/call answered with another request's id: %+v %s, want an error", r.Error, r.Result)
	}
	if r.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("code %s (%s), want %s: the call was sent", r.Error.Code, r.Error.Message, subjects.CodeOutcomeUnknown)
	}
}

// TestHTTPCallStreamSkipsOtherAnswers: on a tools/call's event stream, an answer with another
// id (a gateway routing a late answer to the wrong stream) was taken as the call's; it is
// skipped, and the call's own answer, which follows, is the result.
func TestHTTPCallStreamSkipsOtherAnswers(t *testing.T) {
	t.Parallel()
	srv := &rawHTTPServer{call: func(w http.ResponseWriter, id string, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"late-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"the answer to another call\"}]}}\n\n")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"the real answer\"}]}}\n\n", id)
	}}
	h := startRawHTTP(t, "rawsse2", srv)
	r := h.m.Dispatch(context.Background(), "rawsse2", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
	if r.Error != nil || !strings.Contains(string(r.Result), "the real answer") {
		t.Errorf("tools/call: %+v %s, want the real answer", r.Error, r.Result)
	}
}

// TestHTTPCallStreamManyAnswersNoLeak: a server answering a tools/call with several responses
// on its event stream left mcp-go's stream reader blocked for ever on the second one it could
// not hand over: two goroutines and the stream's buffers leaked per call.
func TestHTTPCallStreamManyAnswersNoLeak(t *testing.T) {
	srv := &rawHTTPServer{call: func(w http.ResponseWriter, id string, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 5 {
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n", id)
		}
	}}
	h := startRawHTTP(t, "rawmany", srv)
	call := func() {
		r := h.m.Dispatch(context.Background(), "rawmany", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
		if r.Error != nil {
			t.Fatalf("tools/call: %+v", r.Error)
		}
	}
	call()
	base := runtime.NumGoroutine()
	const calls = 200
	for range calls {
		call()
	}
	// Goroutines that are merely ending get a moment; leaked ones never end.
	var n int
	for i := 0; i < 50; i++ {
		if n = runtime.NumGoroutine(); n < base+calls/2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n >= base+calls/2 {
		t.Errorf("%d goroutines after %d calls (%d before): leaked per call", n, calls, base)
	}
}

// lineCounter counts the log lines that hold want.
type lineCounter struct {
	want string
	n    atomic.Int64
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(strings.Count(string(p), c.want)))
	return len(p), nil
}

// TestMalformedNotificationsNotLoggedEach: a streamable HTTP server flooding notifications
// whose params are not an object had mcp-go log an error for each, which the connector wrote
// at warn level: one warning line per message the server chose to send (a disk filled by
// one hostile server). A repeated transport complaint is a warning once, then debug.
func TestMalformedNotificationsNotLoggedEach(t *testing.T) {
	t.Parallel()
	const n = 1000
	var sent atomic.Bool
	srv := &rawHTTPServer{get: func(w io.Writer, flush func(), _ <-chan struct{}) {
		for range n {
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"not an object\"}\n\n")
		}
		// Then a notification that shows all of the above were read.
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		flush()
		sent.Store(true)
	}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	warns := &lineCounter{want: `"level":"warn"`}
	env := natstest.Start(t)
	cfg := fastConfig(ServerConfig{Name: "rawlog", Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
	m := New(env.JS, env.NC, cfg, zerolog.New(warns).Level(zerolog.InfoLevel))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	rec := record(t, env, subjects.RegistryServer("rawlog"))
	rec.wait(0, "the list_changed after the flood", isChanged(subjects.KindTools))
	if got := warns.n.Load(); got > 10 {
		t.Errorf("%d warnings logged for %d malformed notifications", got, n)
	}
}

// nestingSSE answers every answer the client posts to one of its requests with an event stream
// holding a new request.
type nestingSSE struct {
	*rawSSEServer
	answers atomic.Int32
}

func (s *nestingSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil && m["method"] == nil {
			n := s.answers.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"n-%d\",\"method\":\"ping\"}\n\n", n)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	s.rawSSEServer.ServeHTTP(w, r)
}

// TestServerRequestAnswerNotNested: a server that answered the POST carrying the answer to its
// request with an event stream holding another request had that one answered too, from within
// the first answer, and so on without end: the connector's stack and the answers grew for ever.
func TestServerRequestAnswerNotNested(t *testing.T) {
	t.Parallel()
	srv := &nestingSSE{rawSSEServer: &rawSSEServer{out: make(chan string, 16)}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "nest", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("nest"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	srv.out <- `{"jsonrpc":"2.0","id":"first","method":"ping"}`
	waitUntil(t, "the answer to the server's ping", func() bool { return srv.answers.Load() > 0 })
	time.Sleep(500 * time.Millisecond)
	if n := srv.answers.Load(); n > 1 {
		t.Errorf("%d answers posted for one request of the server's: requests on the answer's stream were answered", n)
	}
}

// TestHTTPListAnswerWithAnotherID: a tools/list answered with the id of another request is a
// malformed answer, not the list.
func TestHTTPListAnswerWithAnotherID(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(&rawHTTPServer{listID: `"someone-else"`})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "rawlist", Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("rawlist"))
	st := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeMalformedResponse)).ev.Status
	if !strings.Contains(st.Reason, "another request") {
		t.Errorf("reason %q does not say the id was another request's", st.Reason)
	}
}

// TestHTTPCallAnswerWithIDAsString: a lax server that answers request 7 with the id "7" (a
// string) answers request 7: this client numbers its requests from one counter, so no other
// request has that value. Matching ids by type as well dropped such answers, and a tools/call
// that had run was reported outcome_unknown.
func TestHTTPCallAnswerWithIDAsString(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		srv := &rawHTTPServer{call: func(w http.ResponseWriter, id string, n int) {
			quoted := strconv.Quote(strings.Trim(id, `"`))
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"the real answer\"}]}}\n\n", quoted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"the real answer"}]}}`, quoted)
		}}
		name := "rawstrid" + strconv.FormatBool(stream)
		h := startRawHTTP(t, name, srv)
		r := h.m.Dispatch(context.Background(), name, subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
		if r.Error != nil || !strings.Contains(string(r.Result), "the real answer") {
			t.Errorf("stream %v: tools/call answered with its id as a string: %+v %s, want the answer", stream, r.Error, r.Result)
		}
	}
}
