package registrysync

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// hung stops answering once hang is set, as a server that hangs does: every request waits
// until the client gives up or release is closed. deletes counts the DELETEs that ended.
type hung struct {
	next    http.Handler
	hang    atomic.Bool
	release chan struct{}
	deletes atomic.Int32
}

func (h *hung) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.hang.Load() && r.Method != http.MethodGet {
		select {
		case <-r.Context().Done():
		case <-h.release:
		}
		if r.Method == http.MethodDelete {
			h.deletes.Add(1)
		}
		return
	}
	h.next.ServeHTTP(w, r)
}

// A legacy streamable HTTP session that the liveness probe finds hung is closed, and mcp-go's
// Close ends it with a DELETE, waiting up to 5 s (a constant of its own) for the answer the hung
// server never gives: the connection_lost status waited for it, 5 s past the probe's timeout,
// and so did the reconnection, Remove and a stopping Manager. The DELETE goes out without
// holding the connector: the status is published while the server still holds it.
func TestHungServerLostWithoutWaitingForDelete(t *testing.T) {
	t.Parallel()
	hs := &hung{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)), release: make(chan struct{})}
	ts := httptest.NewServer(hs)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(hs.release) }) // (before ts.Close: cleanups run last first)
	cfg := fastConfig(ServerConfig{Name: "hangs", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
	cfg.PingEvery = 100 * time.Millisecond
	cfg.PingTimeout = 300 * time.Millisecond
	cfg.ListTimeout = time.Second // (a re-list caught by the hang holds the probes until it fails)
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("hangs"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	hs.hang.Store(true)
	lost := rec.wait(ready.seq, "connection lost", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
	if !strings.Contains(lost.ev.Status.Reason, "liveness probe") {
		t.Errorf("reason %q", lost.ev.Status.Reason)
	}
	if n := hs.deletes.Load(); n != 0 {
		t.Errorf("connection_lost was published after the connector gave up on %d DELETE(s) the hung server held", n)
	}
}
