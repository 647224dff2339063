package registrysync

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A legacy SSE server whose event stream ends before its endpoint event (a crash, a proxy that
// cuts the stream, a server that rejects the session after the 200) fails the connection at
// once, saying so, and the connector tries again after its backoff: before, mcp-go's transport
// went on waiting for the endpoint on a stream that had ended, and the connector waited out
// ConnectTimeout each time.
func TestSSEStreamEndsBeforeEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"empty", ""},
		{"comment", ": hello\n\n"},
		{"other event", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"},
		{"cut event", "event: endpoint\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				gets.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			cfg := fastConfig(ServerConfig{Name: "noendpoint", Transport: TransportSSE, URL: srv.URL + "/sse"})
			cfg.ConnectTimeout = 10 * time.Minute // longer than the waits below: only failing fast passes
			h := run(t, nil, cfg)
			var st subjects.Status
			waitUntil(t, "unavailable", func() bool {
				st = h.m.Statuses()["noendpoint"]
				return st.Status == subjects.StatusUnavailable
			})
			if st.Code != subjects.CodeConnectFailed || !strings.Contains(st.Reason, "endpoint event") {
				t.Errorf("status %s %q, want %s saying the stream ended before the endpoint event", st.Code, st.Reason, subjects.CodeConnectFailed)
			}
			// The backoff applies: the connector keeps trying.
			waitUntil(t, "three connection attempts", func() bool { return gets.Load() >= 3 })
		})
	}
}

// A legacy SSE server whose endpoint event names another origin (another host, or http for an
// https server), or is no URL, fails the connection at once, saying so: mcp-go logged it and
// waited on for another endpoint event until ConnectTimeout, then said it timed out.
func TestSSEEndpointElsewhereFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, want string
		untyped              bool // the stream's answer has no Content-Type, which mcp-go reads as one
	}{
		{"other host", "http://elsewhere.invalid:1/message?sessionId=1", "another origin, http://elsewhere.invalid:1", false},
		{"other port", "http://127.0.0.1:1/message?sessionId=1", "another origin, http://127.0.0.1:1", false},
		{"not a URL", "http://[::1/message", "not a URL", false},
		{"other host untyped", "http://elsewhere.invalid:1/message?sessionId=1", "another origin, http://elsewhere.invalid:1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					t.Errorf("%s %s sent: the endpoint was refused", r.Method, r.URL)
					w.WriteHeader(http.StatusAccepted)
					return
				}
				gets.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				if tc.untyped {
					w.Header()["Content-Type"] = nil // (not sniffed either)
				}
				w.WriteHeader(http.StatusOK)
				fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", tc.endpoint)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			t.Cleanup(srv.Close)
			cfg := fastConfig(ServerConfig{Name: "elsewhere", Transport: TransportSSE, URL: srv.URL + "/sse",
				Headers: map[string]string{"X-Api-Key": "key-elsewhere"}})
			cfg.ConnectTimeout = 10 * time.Minute // longer than the waits below: only failing fast passes
			h := run(t, nil, cfg)
			var st subjects.Status
			waitUntil(t, "unavailable", func() bool {
				st = h.m.Statuses()["elsewhere"]
				return st.Status == subjects.StatusUnavailable
			})
			if st.Code != subjects.CodeConnectFailed || !strings.Contains(st.Reason, tc.want) || strings.Contains(st.Reason, "sessionId") {
				t.Errorf("status %s %q, want %s saying %q (without the endpoint's path and query)", st.Code, st.Reason, subjects.CodeConnectFailed, tc.want)
			}
			waitUntil(t, "three connection attempts", func() bool { return gets.Load() >= 3 })
		})
	}
}

// A legacy SSE server whose event stream sends no endpoint event within ConnectTimeout (nor
// ends) fails the connection saying so: it said "context cancelled while waiting for endpoint:
// context canceled", as if the connector had been stopped, the timeout nowhere.
func TestSSENoEndpointWithinConnectTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, ": waiting\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	cfg := fastConfig(ServerConfig{Name: "silent", Transport: TransportSSE, URL: srv.URL + "/sse"})
	cfg.ConnectTimeout = 300 * time.Millisecond
	h := run(t, nil, cfg)
	var st subjects.Status
	waitUntil(t, "unavailable", func() bool {
		st = h.m.Statuses()["silent"]
		return st.Status == subjects.StatusUnavailable
	})
	if st.Code != subjects.CodeConnectFailed || !strings.Contains(st.Reason, "no endpoint event") || !strings.Contains(st.Reason, "within 300ms") {
		t.Errorf("status %s %q, want %s saying no endpoint event came within 300ms", st.Code, st.Reason, subjects.CodeConnectFailed)
	}
}
