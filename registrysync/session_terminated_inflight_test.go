package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// A legacy streamable HTTP server restarts while a tools/call is on its way, and the session
// is found ended by another request before the call's own 404 comes back: the listening GET's
// 404 (mcp-go then refuses the session's next requests itself, and a list and its probe
// fail), or here a re-list's. Closing the ended session cut the call off: outcome_unknown,
// although the server refused it unrun (1 run in 30 of TestSessionTerminatedCallNotRun, whose
// restarted server now answers the GET 405). The call now reads its own answer: unavailable,
// nothing ran, while the connector reconnects.
func TestSessionTerminatedInFlightCallReadsItsRefusal(t *testing.T) {
	t.Parallel()
	var ran, calls atomic.Int32
	var oldID atomic.Pointer[string]
	restarted := newFixture(fixtureOptions{})
	restarted.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return mcp.NewToolResultText("ran"), nil
		})
	first := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true))
	sw := &swappable{}
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			oldID.Store(&id)
		}
		first.ServeHTTP(w, r)
	}))
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "inflight", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("inflight"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.m.mu.Lock()
	c := h.m.conns["inflight"]
	h.m.mu.Unlock()
	old := c.session()

	// The restart. The restarted server holds the old session's tools/call until release,
	// then answers it 404, as it does the GET (a server that forgot the session: the spec has
	// it answer 404).
	release := make(chan struct{})
	next := server.NewStreamableHTTPServer(restarted, server.WithStateful(true))
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") == *oldID.Load() {
			// (as the spec has it; mcp-go's server answers 200 and an empty stream)
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodToolsCall) {
				calls.Add(1)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		}
		next.ServeHTTP(w, r)
	}))

	replies := make(chan subjects.DispatchReply, 1)
	go func() {
		data, _ := json.Marshal(subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
		var r subjects.DispatchReply
		if msg, err := h.env.NC.Request(subjects.Dispatch("inflight"), data, waitLimit); err != nil {
			r.Error = &subjects.Error{Code: "request", Message: err.Error()}
		} else if err := json.Unmarshal(msg.Data, &r); err != nil {
			r.Error = &subjects.Error{Code: "reply", Message: err.Error()}
		}
		replies <- r
	}()
	waitUntil(t, "the call at the restarted server", func() bool { return calls.Load() == 1 })
	// The session is found ended by another request: the listening GET's 404 (then mcp-go
	// refuses the session's next requests itself) or a re-list's; the probe after it fails.
	waitUntil(t, "the old session lost", func() bool {
		relist(t, h, "inflight", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts})
		return old.isLost()
	})
	waitUntil(t, "a new session", func() bool { s := c.session(); return s != nil && s != old })
	select {
	case r := <-replies:
		t.Fatalf("the call was answered before the server answered it: %+v", r.Error)
	default:
	}
	close(release)
	var r subjects.DispatchReply
	select {
	case r = <-replies:
	case <-time.After(waitLimit):
		t.Fatal("no dispatch reply")
	}
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || !strings.Contains(r.Error.Message, "without running it") {
		t.Errorf("got result %s, error %+v; want unavailable, refused by the server without running it", r.Result, r.Error)
	}
	if r.NotSent {
		t.Errorf("notSent set on a call that reached the server")
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}
