package registrysync

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// An HTTP server that drops the connector's connections over and over (reset before an answer,
// an event stream cut short, a 200 with half a body, a server that answers nothing until the
// connection is cut): each attempt's connections and goroutines are gone once the next ones are made.
func TestHTTPDroppedConnectionsLeakNothing(t *testing.T) {
	drops := map[string]func(w http.ResponseWriter, r *http.Request){
		"reset": func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
		},
		"half-body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":`))
			_ = http.NewResponseController(w).Flush()
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
		},
		"stream-cut": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(": hello\n\n"))
			_ = http.NewResponseController(w).Flush()
		},
	}
	for name, drop := range drops {
		for _, transport := range []string{TransportHTTP, TransportSSE} {
			t.Run(name+"/"+transport, func(t *testing.T) {
				var reqs atomic.Int64
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					reqs.Add(1)
					drop(w, r)
				}))
				t.Cleanup(ts.Close)
				path := "/mcp"
				if transport == TransportSSE {
					path = "/sse"
				}
				cfg := fastConfig(ServerConfig{Name: "web", Transport: transport, URL: ts.URL + path})
				cfg.BackoffInitial, cfg.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
				cfg.ConnectTimeout = 300 * time.Millisecond // an SSE stream cut before its endpoint event is noticed only then
				run(t, nil, cfg)
				waitUntil(t, "5 requests", func() bool { return reqs.Load() >= 5 })
				base := measure(t)
				from := reqs.Load()
				const attempts = 20
				waitUntil(t, fmt.Sprintf("%d more requests", attempts), func() bool { return reqs.Load() >= from+attempts })
				churnSettledN(t, fmt.Sprintf("%d dropped requests", reqs.Load()-from), base)
			})
		}
	}
}
