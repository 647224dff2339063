package registrysync

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestHugeResponseHeadersRefused: a server answering with megabytes of headers is refused, as
// one answering with a body over its bound is: Go's client took up to 10 MiB of them for each
// response (tens of MiB of heap each), whatever the bound on bodies.
func TestHugeResponseHeadersRefused(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	next := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"initialize"`)) {
				w.Header().Set("X-Padding", big)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "headers", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
	cfg.ConnectTimeout = 10 * time.Minute // (refused at once, or not at all)
	h := run(t, nil, cfg)
	var st subjects.Status
	waitUntil(t, "a verdict", func() bool {
		st = h.m.Statuses()["headers"]
		return st.Status != subjects.StatusConnecting && st.Status != ""
	})
	if st.Status != subjects.StatusUnavailable || !strings.Contains(st.Reason, "headers exceeded") {
		t.Errorf("status %s %s %q, want unavailable saying the response's headers were too large", st.Status, st.Code, st.Reason)
	}
}
