package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// rawSSEServer is a hand-written legacy HTTP+SSE MCP server (2025-11-25) for one client. On
// tools/call it first sends the client a ping request of its own, with the same JSON-RPC id as
// the call (ids are per direction, so this is legal, and both sides count from small numbers),
// then the call's result.
//
// mode, when set, makes it misbehave (see oversize_test.go):
//
//	hugenotify  before the tools/list result, a notification and a request of its own with
//	            the list's id, each an event over the connector's bound
//	hugelist    answers tools/list with an event over the bound, its id last
//	batch       answers tools/list and tools/call with JSON-RPC batches (a list_changed, or
//	            the ping request, then the result)
//	script      answers a tools/call whose argument "l" is set with its lines, "$ID" replaced
//	            by the call's id (see hostileCalls)
type rawSSEServer struct {
	mode string
	out  chan string // data of message events to push
	mu   sync.Mutex
	msgs []map[string]json.RawMessage // posted by the client
}

func (s *rawSSEServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "event: endpoint\ndata: /message?sid=1\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case data := <-s.out:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
				w.(http.Flusher).Flush()
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/message":
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, m)
		s.mu.Unlock()
		var method string
		_ = json.Unmarshal(m["method"], &method)
		id := string(m["id"])
		switch method {
		case "initialize":
			s.out <- `{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw-sse","version":"1"}}}`
		case "ping":
			s.out <- `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`
		case "tools/list":
			switch s.mode {
			case "hugenotify":
				s.out <- `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("n", hugeEvent) + `"}}`
				s.out <- `{"jsonrpc":"2.0","id":` + id + `,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"` + strings.Repeat("r", hugeEvent) + `"}}]}}`
			case "hugelist":
				s.out <- `{"result":{"tools":[{"name":"t","description":"` + strings.Repeat("d", hugeEvent) + `"}]},"jsonrpc":"2.0","id":` + id + `}`
				return
			case "batch":
				s.out <- `[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}]`
				return
			}
			s.out <- `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`
		case "tools/call":
			var params struct {
				Arguments struct {
					L *string `json:"l"`
				} `json:"arguments"`
			}
			if _ = json.Unmarshal(m["params"], &params); s.mode == "script" && params.Arguments.L != nil {
				for line := range strings.SplitSeq(*params.Arguments.L, "\n") {
					s.out <- strings.ReplaceAll(line, "$ID", id)
				}
				return
			}
			if s.mode == "batch" {
				s.out <- `[{"jsonrpc":"2.0","id":` + id + `,"method":"ping"},{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"the real answer"}]}}]`
				return
			}
			s.out <- `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`
			s.out <- `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"the real answer"}]}}`
		}
	default:
		http.NotFound(w, r)
	}
}

// answered reports whether the client answered the server's request id with a result.
func (s *rawSSEServer) answered(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if _, isReq := m["method"]; !isReq && string(m["id"]) == id && (m["result"] != nil || m["error"] != nil) {
			return true
		}
	}
	return false
}

// TestSSEServerRequestDuringCall: over legacy HTTP+SSE, mcp-go's SSE transport takes every
// message with an id for a response: a request of the server's (a ping, sampling, roots) whose
// id equals the id of a request in flight completed that request with an empty answer (the
// tools/call ended outcome_unknown and its real result was dropped), and it was never answered.
func TestSSEServerRequestDuringCall(t *testing.T) {
	t.Parallel()
	srv := &rawSSEServer{out: make(chan string, 16)}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "rawsse", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("rawsse"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	r := h.m.Dispatch(context.Background(), "rawsse", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
	if r.Error != nil || !strings.Contains(string(r.Result), "the real answer") {
		t.Errorf("tools/call: %+v %s, want the real answer", r.Error, r.Result)
	}
	var callID string
	srv.mu.Lock()
	for _, m := range srv.msgs {
		if string(m["method"]) == `"tools/call"` {
			callID = string(m["id"])
		}
	}
	srv.mu.Unlock()
	waitUntil(t, "an answer to the server's ping", func() bool { return srv.answered(callID) })
}

// TestSSERequestsFilter: the SSE filter passes every event through byte for byte, whatever the
// read sizes and line endings, except message events holding a request, which it answers.
func TestSSERequestsFilter(t *testing.T) {
	in := "event: endpoint\r\ndata: /message?sid=1\r\n\r\n" +
		": a comment\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" +
		"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s-2\",\r\ndata: \"method\":\"roots/list\"}\r\n\r\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n" +
		"data: cut short"
	want := "event: endpoint\r\ndata: /message?sid=1\r\n\r\n" +
		": a comment\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n" +
		"data: cut short"
	for _, size := range []int{1, 7, 1 << 20} {
		var got []string
		f := &sseRequests{src: io.NopCloser(&chunked{s: in, n: size}), answer: func(id json.RawMessage, method string) {
			got = append(got, string(id)+" "+method)
		}}
		out, err := io.ReadAll(f)
		if err != nil || string(out) != want {
			t.Errorf("reads of %d: %v\n%q\nwant\n%q", size, err, out, want)
		}
		if strings.Join(got, ",") != `7 ping,"s-2" roots/list` {
			t.Errorf("reads of %d: answered %v", size, got)
		}
	}
}

// chunked reads s at most n bytes at a time.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.s))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

// TestSSERequestsMemory: the SSE filter sits on every event of a legacy SSE session for its
// whole life. It kept the buffer a large event had grown (up to the event bound, ~9 MiB) for
// the life of the stream, and allocated a fresh 32 KiB read buffer for every read of the
// stream (one per small event at call rates).
func TestSSERequestsMemory(t *testing.T) {
	big := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"" + strings.Repeat("x", 4<<20) + "\"}}\n\n"
	small := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"
	f := &sseRequests{src: io.NopCloser(&chunked{s: big + small, n: 32 << 10}), answer: func(json.RawMessage, string) {}}
	got := make([]byte, len(big)+len(small))
	if _, err := io.ReadFull(f, got); err != nil || string(got) != big+small {
		t.Fatalf("read: %v", err)
	}
	if c := cap(f.in); c > 1<<20 {
		t.Errorf("after a 4 MiB event the filter still holds a %d-byte buffer", c)
	}

	const events = 1000
	f = &sseRequests{src: io.NopCloser(&oneEventPerRead{ev: small, left: events}), answer: func(json.RawMessage, string) {}}
	p := make([]byte, 4096)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range events {
		if n, err := f.Read(p); err != nil || string(p[:n]) != small {
			t.Fatalf("read: %q %v", p[:n], err)
		}
	}
	runtime.ReadMemStats(&after)
	if perEvent := (after.TotalAlloc - before.TotalAlloc) / events; perEvent > 4<<10 {
		t.Errorf("%d bytes allocated per %d-byte event", perEvent, len(small))
	}
}

// oneEventPerRead returns ev once per Read, left times.
type oneEventPerRead struct {
	ev   string
	left int
}

func (r *oneEventPerRead) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	r.left--
	return copy(p, r.ev), nil
}

// BenchmarkSSERequestsLargeEvent: one large event arriving in small reads. Each read rescanned
// and moved every byte of the event so far: quadratic (an 8 MiB event in 4 KiB reads took
// about 1.2 s of CPU on the stream's reader, holding every other answer of the session).
func BenchmarkSSERequestsLargeEvent(b *testing.B) {
	ev := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"" + strings.Repeat("x", 8<<20) + "\"}}\n\n"
	b.SetBytes(int64(len(ev)))
	for range b.N {
		f := &sseRequests{src: io.NopCloser(&chunked{s: ev, n: 4 << 10}), answer: func(json.RawMessage, string) {}}
		if n, err := io.Copy(io.Discard, f); err != nil || n != int64(len(ev)) {
			b.Fatal(n, err)
		}
	}
}
