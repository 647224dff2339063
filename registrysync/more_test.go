package registrysync

import (
	"bytes"
	"context"
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

// The legacy HTTP+SSE transport against an mcp-go SSE server: listed, and list_changed
// followed.
func TestSSE(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	h := run(t, nil, fastConfig(ServerConfig{Name: "sse", Transport: TransportSSE, URL: sseFixture(t, srv)}))
	rec := record(t, h.env, subjects.RegistryServer("sse"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	t.Logf("SSE protocol: %s", ready.ev.Status.Protocol)
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "echo") {
		t.Fatalf("tools = %v", names(t, snap))
	}
	srv.DeleteTools("echo")
	changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
	if cur := currentAfter(t, rec, changed.seq); hasName(t, cur.ev.Snapshot, "echo") {
		t.Errorf("list_changed #%d answered by %s, which still holds echo", changed.seq, cur)
	}
	r := dispatch(t, h, "sse", subjects.DispatchRequest{V: 1, Tool: "pid"})
	if r.Error != nil {
		t.Errorf("dispatch over SSE: %+v", r.Error)
	}
}

// A server that never notifies (no listChanged capability) is caught by the periodic resync.
func TestResyncWithoutNotifications(t *testing.T) {
	t.Parallel()
	srv := server.NewMCPServer("quiet", "1", server.WithToolCapabilities(false))
	for _, n := range []string{"a", "b"} {
		srv.AddTool(mcp.NewTool(n), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(n), nil
		})
	}
	cfg := fastConfig(ServerConfig{Name: "quiet", URL: httpFixture(t, srv)})
	cfg.ResyncEvery = 100 * time.Millisecond
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("quiet"))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return hasName(t, s, "b") }))
	srv.DeleteTools("b")
	rec.wait(first.seq, "snapshot without b", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return !hasName(t, s, "b") }))
	for _, e := range rec.all() {
		if e.ev.ListChanged != nil {
			t.Errorf("unexpected list_changed %s", e)
		}
	}
}

// misbehave wraps an HTTP handler: with badList set, tools/list gets a body that is not JSON;
// with hang set, every request blocks until the client gives up.
type misbehave struct {
	next    http.Handler
	badList atomic.Bool
	hang    atomic.Bool
	release chan struct{} // closed at cleanup
	t       *testing.T
}

func (m *misbehave) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.hang.Load() {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-m.release:
			m.t.Logf("still hanging at cleanup: %s %s", r.Method, body)
		}
		return
	}
	if m.badList.Load() && r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"cut`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	m.next.ServeHTTP(w, r)
}

// Over HTTP: a tools/list body that is not JSON is malformed_response while the session stays
// (the probe answers), and a server that stops answering is caught by the periodic probe,
// then reconnected once it answers again.
func TestHTTPMalformedAndHung(t *testing.T) {
	t.Parallel()
	mb := &misbehave{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})), release: make(chan struct{}), t: t}
	ts := httptest.NewServer(mb)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(mb.release) })
	cfg := fastConfig(ServerConfig{Name: "mb", URL: ts.URL + "/mcp"})
	cfg.PingEvery = 100 * time.Millisecond
	cfg.PingTimeout = 500 * time.Millisecond
	cfg.ConnectTimeout = 500 * time.Millisecond
	cfg.ListTimeout = 2 * time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("mb"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	mb.badList.Store(true)
	rr := relist(t, h, "mb", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
	if rr.Error == nil || rr.Error.Code != subjects.CodeUnavailable || !strings.Contains(rr.Error.Reason, subjects.CodeMalformedResponse) {
		t.Errorf("relist reply %+v", rr.Error)
	}
	bad := rec.wait(ready.seq, "malformed_response", isStatus(subjects.StatusUnavailable, subjects.CodeMalformedResponse))
	mb.badList.Store(false)
	fixed := rec.wait(bad.seq, "ready again", isStatus(subjects.StatusReady, ""))

	mb.hang.Store(true)
	lost := rec.wait(fixed.seq, "connection lost", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
	if !strings.Contains(lost.ev.Status.Reason, "liveness probe") {
		t.Errorf("reason %q", lost.ev.Status.Reason)
	}
	mb.hang.Store(false)
	rec.wait(lost.seq, "ready after the hang", isStatus(subjects.StatusReady, ""))
}

func TestPendingDue(t *testing.T) {
	c := &connector{pending: map[subjects.Kind]pendingRelist{}, spurious: map[subjects.Kind]int{},
		relistSig: make(chan struct{}, 1), kinds: subjects.Kinds}
	if _, ok := c.pendingDue(time.Second, time.Minute); ok {
		t.Fatal("due with nothing pending")
	}
	c.requestRelist([]subjects.Kind{subjects.KindTools})
	p := c.pending[subjects.KindTools]
	due, ok := c.pendingDue(time.Second, time.Minute)
	if !ok || !due.Equal(p.last.Add(time.Second)) {
		t.Errorf("due = %v, want last+1s", due)
	}
	// A burst keeps postponing, but never past maxDebounceFactor debounces after the first.
	p.last = p.first.Add(time.Hour)
	c.pending[subjects.KindTools] = p
	if due, _ := c.pendingDue(time.Second, time.Minute); !due.Equal(p.first.Add(maxDebounceFactor * time.Second)) {
		t.Errorf("due = %v, want first+%ds", due, maxDebounceFactor)
	}
	// Notifications that keep proving spurious delay the re-list, up to maxDebounceFactor
	// debounces (below the limit).
	c.spurious[subjects.KindTools] = spuriousFree + 10
	p.last = p.first
	c.pending[subjects.KindTools] = p
	if due, _ := c.pendingDue(time.Second, time.Minute); !due.Equal(p.first.Add(maxDebounceFactor * time.Second)) {
		t.Errorf("due = %v, want first+%ds", due, maxDebounceFactor)
	}
	if got := c.takePending(p.first.Add(maxDebounceFactor*time.Second-time.Millisecond), time.Second, time.Minute); len(got) != 0 {
		t.Errorf("taken before its delay: %v", got)
	}
	c.requestRelist(nil)
	if got := c.takePending(p.first.Add(time.Minute), time.Second, time.Minute); len(got) != len(subjects.Kinds) {
		t.Errorf("pending = %v", got)
	}
	if got := c.takePending(p.first.Add(time.Hour), time.Second, time.Minute); len(got) != 0 {
		t.Errorf("pending after take = %v", got)
	}
}

func TestRelistDelay(t *testing.T) {
	d := 10 * time.Millisecond
	for _, c := range []struct {
		spurious int
		limit    time.Duration
		want     time.Duration
	}{
		{0, time.Second, d}, {spuriousFree - 1, time.Second, d},
		{spuriousFree, time.Second, 2 * d}, {spuriousFree + 1, time.Second, 4 * d},
		{spuriousFree + 1000, time.Second, maxDebounceFactor * d}, // gentle: no more than a debounced burst
		{spuriousFree + 1000, 50 * time.Millisecond, 50 * time.Millisecond},
		{spuriousFree + 5, time.Millisecond, d}, // a limit under the debounce: the debounce
	} {
		if got := relistDelay(c.spurious, d, c.limit); got != c.want {
			t.Errorf("relistDelay(%d, %s, %s) = %s, want %s", c.spurious, d, c.limit, got, c.want)
		}
	}
}

// sseFixture serves srv over the legacy HTTP+SSE transport and returns its /sse URL (as
// httpFixture does for streamable HTTP).
func sseFixture(t *testing.T, srv *server.MCPServer) string {
	t.Helper()
	sse := server.NewSSEServer(srv)
	ts := httptest.NewServer(sse)
	t.Cleanup(ts.Close)
	server.WithBaseURL(ts.URL)(sse)
	return ts.URL + "/sse"
}
