package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// A prompts list refused HTTP 503 with a long Retry-After holds prompts past a reconnection
// (TestRelistRetryAfterSurvivesReconnect). But the server restarted without prompts: the new
// session does not offer them, and their list is the connector's own (an empty one, which
// asks the server nothing). Holding it anyway kept the prompts the server no longer has,
// listed, for up to the whole wait (10 minutes); a kind the new session does not offer is
// retracted at once, as before the wait outlived the session.
func TestRetryAfterHeldKindNotOfferedRetracted(t *testing.T) {
	t.Parallel()
	var refusePrompts atomic.Bool
	var oldID atomic.Pointer[string]
	first := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true))
	sw := &swappable{}
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			oldID.Store(&id)
		}
		if r.Method == http.MethodPost && refusePrompts.Load() {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodPromptsList) {
				w.Header().Set("Retry-After", "600")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		}
		first.ServeHTTP(w, r)
	}))
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "dropsprompts", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("dropsprompts"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rec.wait(0, "the prompts listed", isSnapshot(subjects.KindPrompts, func(s *subjects.Snapshot) bool { return len(s.Items) == 1 }))
	h.m.mu.Lock()
	c := h.m.conns["dropsprompts"]
	h.m.mu.Unlock()
	old := c.session()

	refusePrompts.Store(true)
	if rep := relist(t, h, "dropsprompts", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts}); rep.Error == nil || rep.Error.RetryAfterMs < 60_000 {
		t.Fatalf("relist prompts refused 503 Retry-After 600: %+v; want unavailable with the wait", rep.Error)
	}

	// The server restarts without prompts; the old session's GET is answered 404.
	restarted := server.NewMCPServer("fixture", "2.0.0", server.WithToolCapabilities(true))
	restarted.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	next := server.NewStreamableHTTPServer(restarted, server.WithStateful(true))
	oldSession := *oldID.Load()
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == oldSession {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	}))
	var mark uint64
	for _, e := range rec.all() {
		mark = max(mark, e.seq)
	}
	ts.CloseClientConnections()
	waitUntil(t, "a new session", func() bool {
		if s := c.session(); s != nil && s != old {
			return true
		}
		relist(t, h, "dropsprompts", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}) // finds the old session ended
		return false
	})
	rec.wait(mark, "the prompts retracted (the restarted server offers none)",
		isSnapshot(subjects.KindPrompts, func(s *subjects.Snapshot) bool { return len(s.Items) == 0 }))
	if rep := relist(t, h, "dropsprompts", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts}); rep.Error != nil {
		t.Errorf("relist prompts on the new session (not offered: an empty list, nothing asked): %+v", rep.Error)
	}
}
