package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStdioHugeNotificationSparesList: a notification (or a request of the server's) longer
// than a line may be failed the list in flight: every too-long line cancelled the handshake
// and the lists waiting, as a line that is not JSON does, so a server that logs a huge message
// while answering tools/list was reported snapshot_too_large. Such a line is discarded up to
// its newline and fails nothing; only an answer whose id can be read fails its request.
func TestStdioHugeNotificationSparesList(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rawServer(t, "hn", "hugenotify")))
	rec := record(t, h.env, subjects.RegistryServer("hn"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusReady || st.Code != "" {
		t.Fatalf("status %s %s %q, want ready: the huge lines were no answer", st.Status, st.Code, st.Reason)
	}
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return hasName(t, s, "t") }))
	// The session goes on: a call is answered.
	if r := h.m.Dispatch(context.Background(), "hn", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000}); r.Error != nil {
		t.Fatalf("call after the huge lines: %+v", r.Error)
	}
}

// TestStdioHugeListAnswerIDLast: an answer to tools/list over what a line may be, its id
// written last (as the TypeScript SDK does), fails that list at once, snapshot_too_large.
func TestStdioHugeListAnswerIDLast(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rawServer(t, "hl", "hugelist"))
	cfg.ListTimeout = 10 * waitLimit // longer than the test waits: only the attribution ends it
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("hl"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeSnapshotTooLarge || !strings.Contains(st.Reason, "line longer than") {
		t.Errorf("status %s %s %q, want unavailable %s: a line longer than allowed", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}

// TestStdioBatch: a JSON-RPC batch (MCP 2025-03-26) was handed whole to mcp-go, which dropped
// it: the answers in it were lost (the list and the call waited out their timeouts), and so were
// the notifications and requests. Each message of a batch is now handled as if it came alone.
func TestStdioBatch(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rawServer(t, "b", "batch"))
	cfg.ListTimeout = 10 * waitLimit
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("b"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusReady {
		t.Fatalf("status %s %s %q, want ready", st.Status, st.Code, st.Reason)
	}
	// The list_changed notification in the batch was seen.
	rec.wait(0, "a list_changed from the batch", isChanged(subjects.KindTools))
	r := h.m.Dispatch(context.Background(), "b", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000})
	if r.Error != nil || !strings.Contains(string(r.Result), "from a batch") {
		t.Fatalf("call answered in a batch: %+v %s", r.Error, r.Result)
	}
}

// TestStdioBatchTooLong: a batch of more than maxBatch messages is refused whole, and the list
// it may answer fails at once (malformed_response), not at its timeout.
func TestStdioBatchTooLong(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rawServer(t, "bb", "bigbatch"))
	cfg.ListTimeout = 10 * waitLimit
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("bb"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeMalformedResponse || !strings.Contains(st.Reason, "batch") {
		t.Errorf("status %s %s %q, want unavailable %s: a batch refused", st.Status, st.Code, st.Reason, subjects.CodeMalformedResponse)
	}
}

func TestOversizeID(t *testing.T) {
	for _, tc := range []struct {
		head, tail, want string
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"tools":[`, `"}]}}`, `7`},
		{` { "jsonrpc" : "2.0" , "id" : "abc", "error": {`, `}}`, `"abc"`},
		{`{"ID":3,"Result":{`, `}}`, `3`},
		{`{"result":{"content":[{"type":"text","text":"`, `xx"}]},"jsonrpc":"2.0","id":12}` + "\n", `12`},
		{`{"result":{"content":[`, `]} , "id" : "mcpstream-4" }`, `"mcpstream-4"`},
		// Not an answer: a notification, a request, no result or error at the start.
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`, `"},"id":5}`, ``},
		{`{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{`, `}}`, ``},
		{`{"jsonrpc":"2.0","id":5,"params":{`, `},"method":"x"}`, ``},
		{`[{"jsonrpc":"2.0","id":5,"result":{`, `}}]`, ``},
		// An id that cannot be read so.
		{`{"result":{"text":"`, `xx\"id\":5}`, ``},
		{`{"result":{"text":"`, `"a":{"id":5}}`, ``},
		{`{"result":{"text":"`, `"id":"a\"b"}`, ``},
		{`{"jsonrpc":"2.0","id":null,"error":{`, `}}`, ``},
		{`{"jsonrpc":"2.0","id":1.5,"result":{`, `}}`, ``},
		{`{"jsonrpc":"2.0","i\u0064":1,"result":{`, `}}`, ``},
	} {
		id, ok := oversizeID([]byte(tc.head), []byte(tc.tail))
		if got := string(id); ok != (tc.want != "") || got != tc.want {
			t.Errorf("oversizeID(%q, %q) = %q %v, want %q", tc.head, tc.tail, got, ok, tc.want)
		}
	}
}

func TestSplitBatch(t *testing.T) {
	got, err := splitBatch([]byte(`[ {"a":"],[{"} ,{"b":[1,{"c":2}]},{}]`))
	if err != nil || len(got) != 3 || string(got[0]) != `{"a":"],[{"}` || string(got[1]) != `{"b":[1,{"c":2}]}` || string(got[2]) != `{}` {
		t.Fatalf("split: %q %v", got, err)
	}
	for _, bad := range []string{`[]`, `[1]`, `[{},"x"]`, `[[{}]]`, `[` + strings.Repeat(`{},`, maxBatch) + `{}]`} {
		if _, err := splitBatch([]byte(bad)); err == nil {
			t.Errorf("%.40q: no error", bad)
		}
	}
	if _, err := splitBatch([]byte(`[` + strings.Repeat(`{},`, maxBatch-1) + `{}]`)); err != nil {
		t.Errorf("a batch of maxBatch: %v", err)
	}
}

// TestSSEHugeNotificationSparesList: on legacy HTTP+SSE, one event over the bound (a
// notification, a request of the server's) failed the whole stream: the session was lost, and
// the list in flight with it. Such an event is discarded up to its end and fails nothing.
func TestSSEHugeNotificationSparesList(t *testing.T) {
	t.Parallel()
	srv := &rawSSEServer{mode: "hugenotify", out: make(chan string, 16)}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h := run(t, smallPayloadNATS(t), fastConfig(ServerConfig{Name: "ssehn", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("ssehn"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusReady || st.Code != "" {
		t.Fatalf("status %s %s %q, want ready: the huge events were no answer", st.Status, st.Code, st.Reason)
	}
	if r := h.m.Dispatch(context.Background(), "ssehn", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000}); r.Error != nil || !strings.Contains(string(r.Result), "the real answer") {
		t.Fatalf("call after the huge events: %+v %s", r.Error, r.Result)
	}
}

// TestSSEHugeListAnswer: an answer over the bound on the legacy SSE stream, its id last, fails
// its list at once, snapshot_too_large (it lost the session).
func TestSSEHugeListAnswer(t *testing.T) {
	t.Parallel()
	srv := &rawSSEServer{mode: "hugelist", out: make(chan string, 16)}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "ssehl", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"})
	cfg.ListTimeout = 10 * waitLimit
	h := run(t, smallPayloadNATS(t), cfg)
	rec := record(t, h.env, subjects.RegistryServer("ssehl"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeSnapshotTooLarge {
		t.Errorf("status %s %s %q, want unavailable %s", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}

// TestSSEBatch: a JSON-RPC batch on the legacy SSE stream was dropped by mcp-go (it could not
// decode an array): the answers in it were lost, the list waited out its timeout.
func TestSSEBatch(t *testing.T) {
	t.Parallel()
	srv := &rawSSEServer{mode: "batch", out: make(chan string, 16)}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "sseb", Transport: TransportSSE, URL: ts.URL + "/sse", ProtocolVersion: "2025-11-25"})
	cfg.ListTimeout = 10 * waitLimit
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("sseb"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusReady {
		t.Fatalf("status %s %s %q, want ready", st.Status, st.Code, st.Reason)
	}
	rec.wait(0, "a list_changed from the batch", isChanged(subjects.KindTools))
	r := h.m.Dispatch(context.Background(), "sseb", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000})
	if r.Error != nil || !strings.Contains(string(r.Result), "the real answer") {
		t.Fatalf("call answered in a batch: %+v %s", r.Error, r.Result)
	}
	var callID string
	srv.mu.Lock()
	for _, m := range srv.msgs {
		if string(m["method"]) == `"tools/call"` {
			callID = string(m["id"])
		}
	}
	srv.mu.Unlock()
	waitUntil(t, "an answer to the server's ping in the batch", func() bool { return srv.answered(callID) })
}

// misbehavingHTTP answers tools/list POSTs of a streamable HTTP server (next answers the rest):
//
//	jsonbatch  a JSON body holding a batch: a list_changed notification, then the result
//	ssebatch   the same batch as the one event of an event stream
//	ssehuge    an event stream: a notification over the connector's bound, then the result
//	ssehugeanswer  an event stream: the result, over the bound, its id last
type misbehavingHTTP struct {
	next http.Handler
	mode string
}

func (m *misbehavingHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method == "tools/list" {
			id := string(msg.ID)
			result := `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`
			batch := `[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},` + result + `]`
			switch m.mode {
			case "jsonbatch":
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, batch)
				return
			case "ssebatch":
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: "+batch+"\n\n")
				return
			case "ssehuge":
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+strings.Repeat("n", hugeEvent)+`"}}`+"\n\n")
				_, _ = io.WriteString(w, "event: message\ndata: "+result+"\n\n")
				return
			case "ssehugeanswer":
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, `event: message`+"\n"+`data: {"result":{"tools":[{"name":"t","description":"`+strings.Repeat("d", hugeEvent)+`"}]},"jsonrpc":"2.0","id":`+id+"}\n\n")
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	m.next.ServeHTTP(w, r)
}

// TestStreamableHTTPBatchesAndHugeEvents: on streamable HTTP, an answer to tools/list that is a
// JSON batch failed to decode (the list failed, its notification lost), one that is an event
// holding a batch was dropped (the list waited for an answer that had come), and a notification
// event over the bound failed the list its stream answered. Batches are taken apart; a huge
// event fails only the request it answers.
func TestStreamableHTTPBatchesAndHugeEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, status, code string
		changed            bool
	}{
		{"jsonbatch", subjects.StatusReady, "", true},
		{"ssebatch", subjects.StatusReady, "", true},
		{"ssehuge", subjects.StatusReady, "", false},
		{"ssehugeanswer", subjects.StatusUnavailable, subjects.CodeSnapshotTooLarge, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(&misbehavingHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})), mode: tc.mode})
			t.Cleanup(ts.Close)
			cfg := fastConfig(ServerConfig{Name: tc.mode, Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
			cfg.ListTimeout = 10 * waitLimit
			h := run(t, smallPayloadNATS(t), cfg)
			rec := record(t, h.env, subjects.RegistryServer(tc.mode))
			e := rec.wait(0, "ready or unavailable", settled)
			if st := e.ev.Status; st.Status != tc.status || st.Code != tc.code {
				t.Fatalf("status %s %s %q, want %s %s", st.Status, st.Code, st.Reason, tc.status, tc.code)
			}
			if tc.changed {
				rec.wait(0, "a list_changed from the batch", isChanged(subjects.KindTools))
			}
		})
	}
}

// TestOversizeIDIsJSON: the id read from a message too large to take is spliced into the local
// answer that fails its request; an id that is not a JSON value — a number with leading zeros,
// a string with a raw control character (a newline splits the local answer's event in two on
// an event stream), or longer than the 128 bytes read at the start — made a local answer that
// is not JSON: mcp-go dropped it, and the request waited out its timeout (the server's own
// answer could not have been taken either, but nothing should be read from text that is not
// an id).
func TestOversizeIDIsJSON(t *testing.T) {
	long := `"` + strings.Repeat("a", 129) + `"`
	for _, tc := range []struct{ head, tail string }{
		{`{"jsonrpc":"2.0","id":007,"result":{`, `}}`},
		{`{"jsonrpc":"2.0","result":{`, `},"id":00}`},
		{`{"jsonrpc":"2.0","result":{`, `},"id":-01}`},
		{`{"jsonrpc":"2.0","result":{`, "},\"id\":\"a\nb\"}"},
		{`{"jsonrpc":"2.0","result":{`, "},\"id\":\"a\rb\"}"},
		{`{"jsonrpc":"2.0","result":{`, `},"id":` + long + `}`},
	} {
		id, ok := oversizeID([]byte(tc.head), []byte(tc.tail))
		if !ok {
			continue
		}
		if !json.Valid(localAnswer(id, localTooLarge, "x")) {
			t.Errorf("oversizeID(%q, %q) = %q: its local answer is not JSON", tc.head, tc.tail, id)
		}
	}
	// Ids of every form this client and lax servers use still read.
	for _, tc := range []struct{ head, tail, want string }{
		{`{"jsonrpc":"2.0","id":0,"result":{`, `}}`, `0`},
		{`{"jsonrpc":"2.0","result":{`, `},"id":10}`, `10`},
		{`{"jsonrpc":"2.0","result":{`, `},"id":-3}`, `-3`},
		{`{"jsonrpc":"2.0","result":{`, `},"id":"mcpstream-12"}`, `"mcpstream-12"`},
	} {
		if id, ok := oversizeID([]byte(tc.head), []byte(tc.tail)); !ok || string(id) != tc.want {
			t.Errorf("oversizeID(%q, %q) = %q %v, want %s", tc.head, tc.tail, id, ok, tc.want)
		}
	}
}

// FuzzOversizeIDAndBatch: an id read from a message too large to take makes a local answer
// that is JSON; a batch that splitBatch takes apart has the elements encoding/json sees, each
// of them JSON.
func FuzzOversizeIDAndBatch(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{"tools":[`), []byte(`"}]},"id":"x"}`))
	f.Add([]byte(`[{"a":1}, {"b":[1,2]} ]`), []byte(`,"id": 12 }`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{"v":NaN}}`), []byte(`[{"id":"mcpstream-1","result":{}}]`))
	f.Fuzz(func(t *testing.T, head, tail []byte) {
		// A broken line or a refused batch ends the waiting call only with its exact id.
		for _, refused := range []bool{false, true} {
			if len(head) == 0 {
				break
			}
			c := &child{red: newRedactor(ServerConfig{}), onMalformed: func(string, bool) {}, log: zerolog.Nop()}
			ch := c.fast.register("mcpstream-1")
			if refused {
				if json.Valid(head) && isBatch(head) {
					c.refusedBatch(head)
				}
			} else {
				c.brokenAnswer(head)
			}
			select {
			case r := <-ch:
				if !bytes.Contains(head, []byte(`"mcpstream-1"`)) || r.malformed == "" && !r.batch {
					t.Fatalf("%q (refused batch %v) ended the call: %+v", head, refused, r)
				}
			default:
			}
		}
		if id, ok := oversizeID(head, tail); ok {
			var v any
			if json.Unmarshal(localAnswer(id, localTooLarge, "x"), &v) != nil {
				t.Fatalf("local answer for %q not JSON", id)
			}
		}
		if json.Valid(head) && isBatch(head) {
			elems, err := splitBatch(head)
			if err == nil {
				var all []json.RawMessage
				_ = json.Unmarshal(head, &all)
				if len(all) != len(elems) {
					t.Fatalf("%q: %d elems, want %d", head, len(elems), len(all))
				}
				for _, e := range elems {
					if !json.Valid(e) {
						t.Fatalf("%q: element %q", head, e)
					}
				}
			}
		}
	})
}

// hugeEvent is the size of an event over the connector's bound in the HTTP and SSE tests, which
// run on a NATS server of a 1 MiB max_payload (smallPayloadNATS): the bound is then 2 MiB less a
// little (4 KiB today), against 9 MiB by default. An event over the default bound took ~10 s to
// read under the race detector on the development VM (its shadow memory faulted in page by page
// as the buffer grew), and three such tests side by side under load ran past their 30 s waits.
const hugeEvent = 3 << 20

// smallPayloadNATS is a JetStream server of a 1 MiB max_payload, for the tests of hugeEvent.
func smallPayloadNATS(t *testing.T) *natstest.Env {
	return natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
}
