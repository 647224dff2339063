package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestDispatchHonoursServerCallTimeout: ServerConfig.CallTimeout (the `callTimeout` of the
// config file, "bound of one tools/call") bounds every call. The executor always sends
// TimeoutMs (what is left of its own deadline, 60 s by default), and that replaced the
// server's bound instead of being capped by it: a server configured with callTimeout 30s ran
// calls for 60 s.
func TestDispatchHonoursServerCallTimeout(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "ct", "fixture")
	sc.CallTimeout = 200 * 1e6 // 200 ms
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("ct"))
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	r := h.m.Dispatch(context.Background(), "ct", subjects.DispatchRequest{V: 1, Tool: "slow",
		Arguments: json.RawMessage(`{"ms":3000}`), TimeoutMs: 60000})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Fatalf("slow call with callTimeout 200ms and timeoutMs 60000: %+v %s, want timeout", r.Error, r.Result)
	}
}

// rpcRecorder wraps an MCP HTTP handler and records the JSON-RPC messages clients POST.
type rpcRecorder struct {
	next http.Handler
	mu   sync.Mutex
	msgs []map[string]json.RawMessage
}

func (rr *rpcRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			rr.mu.Lock()
			rr.msgs = append(rr.msgs, m)
			rr.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rr.next.ServeHTTP(w, r)
}

// find returns the first recorded message with method whose param/field pred accepts.
func (rr *rpcRecorder) find(method string, pred func(map[string]json.RawMessage) bool) map[string]json.RawMessage {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, m := range rr.msgs {
		var got string
		_ = json.Unmarshal(m["method"], &got)
		if got == method && (pred == nil || pred(m)) {
			return m
		}
	}
	return nil
}

// TestLegacyHTTPTimeoutSendsCancelled: a tools/call that times out on a legacy (2025-11-25 and
// older) streamable HTTP or SSE connection must be cancelled with notifications/cancelled: on
// those versions closing the HTTP request is not a cancellation (the spec says so), so the
// server kept running the tool. mcp-go sends the notification only on stdio; over HTTP it
// leaves it to the transport, which does it on 2026-07-28 only.
func TestLegacyHTTPTimeoutSendsCancelled(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{TransportHTTP, TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			srv := newFixture(fixtureOptions{})
			rr := &rpcRecorder{}
			var url string
			if transport == TransportHTTP {
				rr.next = server.NewStreamableHTTPServer(srv)
				ts := httptest.NewServer(rr)
				t.Cleanup(ts.Close)
				url = ts.URL + "/mcp"
			} else {
				sse := server.NewSSEServer(srv)
				rr.next = sse
				ts := httptest.NewServer(rr)
				t.Cleanup(ts.Close)
				server.WithBaseURL(ts.URL)(sse)
				url = ts.URL + "/sse"
			}
			name := "cancel-" + transport
			h := run(t, nil, fastConfig(ServerConfig{Name: name, Transport: transport, URL: url, ProtocolVersion: "2025-11-25"}))
			rec := record(t, h.env, subjects.RegistryServer(name))
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

			r := h.m.Dispatch(context.Background(), name, subjects.DispatchRequest{V: 1, Tool: "slow",
				Arguments: json.RawMessage(`{"ms":20000}`), TimeoutMs: 300})
			if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
				t.Fatalf("slow: %+v %s, want timeout", r.Error, r.Result)
			}
			call := rr.find("tools/call", nil)
			if call == nil {
				t.Fatal("no tools/call was posted")
			}
			id := string(call["id"])
			waitUntil(t, "notifications/cancelled for request "+id, func() bool {
				return rr.find("notifications/cancelled", func(m map[string]json.RawMessage) bool {
					var p struct {
						RequestID json.RawMessage `json:"requestId"`
					}
					return json.Unmarshal(m["params"], &p) == nil && string(p.RequestID) == id
				}) != nil
			})
		})
	}
}

// TestNonObjectOutputSchemaKept: since 2026-07-28 (SEP-2106) a tool's outputSchema may be any
// JSON Schema (an array, a primitive, a boolean schema) and structuredContent any JSON value.
// The connector rejected every tool whose outputSchema was not of type object, so such a tool
// vanished from the catalog although the server offers it and it works.
func TestNonObjectOutputSchemaKept(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	srv.AddTool(mcp.NewTool("list_names", mcp.WithDescription("Names, as an array."),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"array","items":{"type":"string"}}`))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured([]string{"a", "b"}, `["a","b"]`), nil
		})
	srv.AddTool(mcp.NewTool("anything", mcp.WithDescription("Any output."),
		mcp.WithRawOutputSchema(json.RawMessage(`true`))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	h := run(t, nil, fastConfig(ServerConfig{Name: "arr", Transport: TransportHTTP, URL: httpFixture(t, srv)}))
	rec := record(t, h.env, subjects.RegistryServer("arr"))
	snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if snap.Info == nil || snap.Info.Protocol != mcp.ProtocolVersion20260728 {
		t.Fatalf("info = %+v, want a 2026-07-28 session", snap.Info)
	}
	for _, name := range []string{"list_names", "anything"} {
		if !hasName(t, snap, name) {
			t.Errorf("%s missing from the snapshot; rejected: %+v", name, snap.Rejected)
		}
	}
	r := h.m.Dispatch(context.Background(), "arr", subjects.DispatchRequest{V: 1, Tool: "list_names"})
	if r.Error != nil || !strings.Contains(string(r.Result), `"structuredContent":["a","b"]`) {
		t.Errorf("list_names: %+v %s", r.Error, r.Result)
	}
}

// dropOnGET cuts the standalone GET stream of a streamable HTTP server once, losing the
// list_changed it was about to carry, as happens when a proxy or load balancer ends an idle
// event stream and the server sends a notification before the client reconnects (servers
// without an event store, like the TypeScript SDK's, drop it).
type dropOnGET struct {
	next  http.Handler
	armed atomic.Bool
}

func (d *dropOnGET) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w = &cutWriter{ResponseWriter: w, d: d}
	}
	d.next.ServeHTTP(w, r)
}

type cutWriter struct {
	http.ResponseWriter
	d *dropOnGET
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("list_changed")) && c.d.armed.CompareAndSwap(true, false) {
		return 0, errors.New("connection cut")
	}
	return c.ResponseWriter.Write(p)
}

func (c *cutWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// TestLegacyHTTPRelistsAfterListenStreamReopens: on legacy streamable HTTP, list_changed comes
// on the standalone GET stream, which mcp-go reopens by itself when it ends. Notifications sent
// in between are lost, so the connector must re-list when the stream reopens (as it does when
// a 2026-07-28 subscriptions/listen stream is reopened); it did not, and the catalog kept a
// removed tool until the next periodic resync (5 minutes by default).
func TestLegacyHTTPRelistsAfterListenStreamReopens(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	cut := &dropOnGET{next: server.NewStreamableHTTPServer(srv)}
	ts := httptest.NewServer(cut)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "cut", Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("cut"))
	first := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return hasName(t, s, "echo") }))

	cut.armed.Store(true)
	if r := h.m.Dispatch(context.Background(), "cut", subjects.DispatchRequest{V: 1, Tool: "drop", Arguments: json.RawMessage(`{"name":"echo"}`)}); r.Error != nil {
		t.Fatalf("drop: %+v", r.Error)
	}
	waitUntil(t, "the list_changed cut from the GET stream", func() bool { return !cut.armed.Load() })
	rec.wait(first.seq, "tools snapshot without echo", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return !hasName(t, s, "echo") }))
}

// TestStdioHugeResultAnswersAtOnce: a stdio server answering tools/call with a line longer than
// the reader takes (maxLineBytes) had its answer dropped as malformed, and the call waited out
// its whole timeout, then reported timeout ("may have run") instead of result_too_large. The
// connector's cap on a line is lowered to a few MiB (Manager.lineBytes): a 65 MiB line took
// seconds to write and read under -race (over 20 s on a loaded machine), and the cap is what
// the reader compares with, whatever its value. A line under the cap would be taken, and its
// result returned: the error below comes from the line being over it.
func TestStdioHugeResultAnswersAtOnce(t *testing.T) {
	const lineCap = 4 << 20
	h := runWith(t, nil, fastConfig(rawServer(t, "huge", "huge", hugeCapEnv+"="+strconv.Itoa(lineCap))), func(m *Manager) { m.lineBytes = lineCap })
	rec := record(t, h.env, subjects.RegistryServer("huge"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := h.m.Dispatch(context.Background(), "huge", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeResultTooLarge {
		t.Fatalf("huge result: %+v, want result_too_large", r.Error)
	}
	if want := "a line over " + strconv.Itoa(lineCap) + " bytes"; !strings.Contains(r.Error.Message, want) {
		t.Fatalf("huge result: %q, want it to say %q", r.Error.Message, want)
	}
	if r := h.m.Dispatch(context.Background(), "huge", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000}); r.Error == nil || r.Error.Code != subjects.CodeResultTooLarge {
		t.Fatalf("second huge result: %+v, want result_too_large", r.Error)
	}
}

func TestFastRouterTooLarge(t *testing.T) {
	for _, tc := range []struct {
		head, tail string
		want       bool
	}{
		{`{"jsonrpc":"2.0","id":"mcpstream-1","result":{"content":[`, `xxxx"}]}}` + "\n", true},
		{`{"jsonrpc": "2.0", "id": "mcpstream-1", "result": {`, `xxxx"}]}}`, true},
		{`{"result":{"content":[{"type":"text","text":"`, `xxx"}]},"jsonrpc":"2.0","id":"mcpstream-1"}` + "\n", true},
		{`{"result":{"content":[{"type":"text","text":"`, `"id":"mcpstream-1" xxx"}]},"jsonrpc":"2.0","id":7}`, false},
		{`{"result":{"content":[{"type":"text","text":"the request was {\"id\":\"mcpstream-1\"}`, `xxx"}]},"jsonrpc":"2.0","id":7}`, false},
		{`{"jsonrpc":"2.0","id":"mcpstream-2","result":{`, `}}`, false}, // nobody waits for 2
	} {
		var r fastRouter
		ch := r.register("mcpstream-1")
		got := r.tooLarge([]byte(tc.head), []byte(tc.tail))
		if got != tc.want {
			t.Errorf("tooLarge(%q, %q) = %v, want %v", tc.head, tc.tail, got, tc.want)
		}
		if got && !(<-ch).tooLarge {
			t.Errorf("the waiting call did not get tooLarge")
		}
	}
}

// TestReadyNotBeforeFirstToolsSnapshot: "ready" means every kind is listed and published. A
// list_changed arriving during the very first tools list (server-everything sends one right
// after initialization) made the connector drop that list and wait for the re-list, but it
// published ready at once: for a debounce period the server was ready with no tools at all
// (calls not_found, `servers` showing 0 tools).
func TestReadyNotBeforeFirstToolsSnapshot(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rawServer(t, "nf", "notifyfirst")))
	rec := record(t, h.env, subjects.RegistryServer("nf"))
	snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if ready.seq < snap.seq {
		var b strings.Builder
		for _, e := range rec.all() {
			b.WriteString("\n  " + e.String())
		}
		t.Errorf("ready (#%d) published before the first tools snapshot (#%d):%s", ready.seq, snap.seq, b.String())
	}
}

// shortGET ends every standalone GET stream of a streamable HTTP server as soon as it opens
// (as a proxy with a short idle timeout, or a server that offers no stream but answers 200,
// does), counting them; other requests go to next.
type shortGET struct {
	next http.Handler
	gets atomic.Int32
}

func (s *shortGET) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.gets.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	s.next.ServeHTTP(w, r)
}

// count returns how many recorded messages have method.
func (rr *rpcRecorder) count(method string) int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	n := 0
	for _, m := range rr.msgs {
		var got string
		_ = json.Unmarshal(m["method"], &got)
		if got == method {
			n++
		}
	}
	return n
}

// TestLegacyHTTPReopenedStreamRelistsBackOff: the re-list every reopened GET stream triggers
// must back off when the stream keeps ending at once. mcp-go reopens it every second, and every
// reopening re-listed every kind: a server whose GET stream never stays up was listed in full
// about once a second, for ever.
func TestLegacyHTTPReopenedStreamRelistsBackOff(t *testing.T) {
	t.Parallel()
	rr := &rpcRecorder{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))}
	sg := &shortGET{next: rr}
	ts := httptest.NewServer(sg)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "short", Transport: TransportHTTP, URL: ts.URL + "/mcp",
		ProtocolVersion: "2025-11-25", Kinds: []string{"tools"}}))
	rec := record(t, h.env, subjects.RegistryServer("short"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	const opens = 9 // mcp-go waits 1 s between two
	waitUntil(t, "the GET stream reopened", func() bool { return sg.gets.Load() >= opens })
	// Backing off from 1 s and doubling, at most four re-lists fit (1 + 1 + 2 + 4 < 9 s), plus the
	// first list; without it there was one per stream.
	if n := rr.count("tools/list"); n > 6 {
		t.Errorf("%d tools/list for %d GET streams that ended at once, want at most 6", n, sg.gets.Load())
	}
}

// TestManagerReadyWaitsForFirstToolsSnapshot: Manager.Ready (the registrysync role's /healthz
// readiness) promises that a server that connected is listed and ready. Once a first tools list
// dropped for a list_changed left the server connecting until the re-list, Ready turned true
// right after that first list, with the server still connecting and no tools published.
func TestManagerReadyWaitsForFirstToolsSnapshot(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rawServer(t, "nfready", "notifyfirst"))
	cfg.Debounce = time.Second // the re-list comes a second after the list_changed
	h := run(t, nil, cfg)
	waitUntil(t, "Ready", h.m.Ready)
	if st := h.m.Statuses()["nfready"]; st.Status != subjects.StatusReady {
		t.Errorf("Ready() with the server %s, want it ready (listed)", st.Status)
	}
}

// TestDispatchHugeTimeoutMs: a timeoutMs past what a time.Duration holds is a long timeout, not
// one that wrapped negative ("the deadline passed before the call was sent").
func TestDispatchHugeTimeoutMs(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "huge", "fixture")
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("huge"))
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	r := h.m.Dispatch(context.Background(), "huge", subjects.DispatchRequest{V: 1, Tool: "slow",
		Arguments: json.RawMessage(`{"ms":1}`), TimeoutMs: math.MaxInt64})
	if r.Error != nil {
		t.Fatalf("timeoutMs MaxInt64: %+v", r.Error)
	}
}
