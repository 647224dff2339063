package registrysync

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// resumingServer is a legacy streamable HTTP server (rawHTTPServer) that ends a tools/call's
// event stream after an event id, before the answer, and gives the answer on the GET that
// resumes it (Last-Event-ID), as SEP-1699 lets a 2025-11-25 server do.
type resumingServer struct {
	*rawHTTPServer
	lastID chan string // the id of the call the resuming GET answers
}

func (s *resumingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		id := <-s.lastID
		fmt.Fprintf(w, "id: r2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n", id)
		return
	}
	s.rawHTTPServer.ServeHTTP(w, r)
}

// TestResumedCallStreamIsNotTheListenStream: the GET that resumes a request's event stream
// (Last-Event-ID) was taken for the standalone GET stream reopening, which has every kind
// re-listed (notifications may have been lost while it was down): a server that has its long
// calls polled so (SEP-1699) had the connector list everything again after each of them.
func TestResumedCallStreamIsNotTheListenStream(t *testing.T) {
	t.Parallel()
	srv := &resumingServer{rawHTTPServer: &rawHTTPServer{}, lastID: make(chan string, 1)}
	srv.call = func(w http.ResponseWriter, id string, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		srv.lastID <- id
		_, _ = io.WriteString(w, "id: r1\nretry: 10\n\n") // then the stream ends: resumed
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	const name = "resumes"
	h := run(t, nil, fastConfig(ServerConfig{Name: name, Transport: TransportHTTP, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer(name))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	c := h.m.conns[name]
	// The standalone GET stream opened (and had everything listed): what a call does next is
	// the call's alone.
	var last time.Time
	waitUntil(t, "the GET stream to open", func() bool {
		s := c.session()
		if s == nil {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		last = s.reopenLast
		return !last.IsZero() && s.reopenTimer == nil
	})
	s := c.session()
	r := h.m.Dispatch(context.Background(), name, subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 10000})
	if r.Error != nil || !strings.Contains(string(r.Result), "resumed") {
		t.Fatalf("tools/call: %+v %s, want the resumed stream's answer", r.Error, r.Result)
	}
	s.mu.Lock()
	relisted, scheduled := !s.reopenLast.Equal(last), s.reopenTimer != nil
	s.mu.Unlock()
	if relisted || scheduled {
		t.Errorf("resuming the call's stream was taken for the GET stream reopening: re-list run %v, scheduled %v", relisted, scheduled)
	}
}
