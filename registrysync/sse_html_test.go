package registrysync

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// An SSE URL that answers with a web page (a login page, a wrong path behind a proxy) fails the
// connection at once, saying what came back: before, the event-stream reader found no endpoint
// event in the page and the connector waited out ConnectTimeout.
func TestSSEEndpointAnswersHTML(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>Please sign in</body></html>")
	}))
	t.Cleanup(srv.Close)
	cfg := fastConfig(ServerConfig{Name: "page", Transport: TransportSSE, URL: srv.URL + "/sse"})
	cfg.ConnectTimeout = 10 * time.Minute // longer than the wait below: only failing fast passes
	h := run(t, nil, cfg)
	var st subjects.Status
	waitUntil(t, "unavailable", func() bool {
		st = h.m.Statuses()["page"]
		return st.Status == subjects.StatusUnavailable
	})
	if !strings.Contains(st.Reason, "text/html") {
		t.Errorf("reason %q, want it to say what the URL answered", st.Reason)
	}
}
