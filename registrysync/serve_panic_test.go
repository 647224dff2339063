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

// failingHTTP answers its first tools/list HTTP 500 (the kind fails: its retry is chosen, in
// serve), and cuts every connection once down.
type failingHTTP struct {
	next           http.Handler
	failList, down atomic.Bool
}

func (f *failingHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		panic(http.ErrAbortHandler) // the connection is cut, nothing answered
	}
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == string(mcp.MethodToolsList) && f.failList.CompareAndSwap(true, false) {
			http.Error(w, "list failed", http.StatusInternalServerError)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// A panic while serving a session (recovered: the loop starts again) left the session open,
// served by nothing, beside the next one (a stdio server's process lived on); and its end was
// kept after the status told the restart, so a re-list while reconnecting was answered with
// the panic's "lost before the re-list ran" instead of the status' reason (the connect's
// failure). The session is closed, and re-lists answered from the status.
func TestServePanicClosesTheSession(t *testing.T) {
	t.Parallel()
	f := &failingHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))}
	f.failList.Store(true)
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	const name = "panicky-serve"
	var left atomic.Pointer[session] // the session serve panicked in
	t.Cleanup(func() {               // (before ts.Close, which waits for its connections: a session left open held one)
		if s := left.Load(); s != nil {
			s.close(0)
		}
	})
	var h *harness
	h = runWith(t, nil, fastConfig(ServerConfig{Name: name, URL: ts.URL + "/mcp", Kinds: []string{"tools"}}), func(m *Manager) {
		hook := func(server, what string, _ time.Duration) {
			if server != name || what != "relist" {
				return
			}
			if s := m.connector(name).session(); s != nil && left.CompareAndSwap(nil, s) {
				f.down.Store(true) // the connector reconnects, and fails: it stays not connected
				panic("a bug while serving")
			}
		}
		m.retryChosen.Store(&hook)
	})
	waitUntil(t, "serve panicked", func() bool { return left.Load() != nil })
	c := h.m.connector(name)
	waitUntil(t, "a connect after the restart failed", func() bool { return c.current().Code == subjects.CodeConnectFailed })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r := h.m.Relist(ctx, name, subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || !strings.Contains(r.Error.Message, "not connected") ||
		r.Error.Reason == "" || strings.Contains(r.Error.Reason, "internal error") {
		t.Errorf("a re-list while reconnecting after the panic: %+v; want unavailable, not connected, with the status' reason (the connect's failure)", r.Error)
	}

	s := left.Load()
	waitUntil(t, "the session serve panicked in is closed", func() bool {
		select {
		case <-s.lost:
			return s.lostErr == errSessionClosed
		default:
			return false
		}
	})
}
