package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// A tools/list refused HTTP 503 with a Retry-After holds the kind until then. A reconnection
// meanwhile (the server restarted: the listening GET's 404 ends the session) listed tools at
// once on the new session, asking the server again before its Retry-After had run: the wait
// now outlives the session, and the new session's retry of tools comes when what is left of
// it has run.
func TestRelistRetryAfterSurvivesReconnect(t *testing.T) {
	t.Parallel()
	var toolsLists atomic.Int32
	sw := &swappable{}
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodToolsList) {
				toolsLists.Add(1)
				w.Header().Set("Retry-After", "9")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		}
		sw.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	type choice struct {
		what string
		wait time.Duration
	}
	chosen := make(chan choice, 64)
	h := runWith(t, nil, fastConfig(ServerConfig{Name: "busyre", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}), func(m *Manager) {
		hook := func(server, what string, d time.Duration) {
			if server == "busyre" {
				select {
				case chosen <- choice{what, d}:
				default:
				}
			}
		}
		m.retryChosen.Store(&hook)
	})
	rec := record(t, h.env, subjects.RegistryServer("busyre"))
	next := func() choice {
		t.Helper()
		select {
		case c := <-chosen:
			return c
		case <-time.After(waitLimit):
			t.Fatalf("no wait chosen within %s", waitLimit)
			return choice{}
		}
	}
	rec.wait(0, "list_failed", isStatus(subjects.StatusUnavailable, subjects.CodeListFailed))
	if c := next(); c.what != "relist" || c.wait != 9*time.Second {
		t.Fatalf("first wait chosen: %s %s; want relist 9s (the server's Retry-After)", c.what, c.wait)
	}
	if n := toolsLists.Load(); n != 1 {
		t.Fatalf("%d tools/list before the restart; want 1", n)
	}

	// The server restarts: the listening GET, reopened, is answered 404 and the session ends.
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	ts.CloseClientConnections()
	for c := next(); c.what != "reconnect"; c = next() {
		// (a re-list the reopened GET stream schedules, before the session is found ended:
		// tools still held)
		if c.what != "relist" || c.wait >= 9*time.Second {
			t.Fatalf("wait chosen after the restart: %s %s; want reconnect", c.what, c.wait)
		}
	}
	// The new session's first lists: tools is held, its retry due when the 9 s have run.
	c := next()
	if c.what != "relist" {
		t.Fatalf("wait chosen after the reconnection: %s %s; want relist", c.what, c.wait)
	}
	if n := toolsLists.Load(); n != 1 {
		t.Errorf("%d tools/list by the time the new session listed; want 1 (the server's Retry-After of 9s still ran)", n)
	}
	if c.wait >= 9*time.Second {
		t.Errorf("the new session lists tools again after %s; the server asked for 9s from its answer, before the reconnection", c.wait)
	}
	if st := h.m.Statuses()["busyre"]; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeListFailed {
		t.Errorf("status after the reconnection: %s %s; want unavailable list_failed (tools still held)", st.Status, st.Code)
	}
}
