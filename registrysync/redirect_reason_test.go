package registrysync

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// redirectTrap is a loopback server recording what reaches it, and a Location pointing at it
// under another host name (localhost, not 127.0.0.1: another origin, and another host for Go's
// header rules), with a long path and a token in its query.
type redirectTrap struct {
	srv      *httptest.Server
	origin   string // http://localhost:PORT
	location string
	mu       sync.Mutex
	got      []string
}

func newRedirectTrap(t *testing.T) *redirectTrap {
	tr := &redirectTrap{}
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tr.mu.Lock()
		tr.got = append(tr.got, r.Method+" "+r.Header.Get("X-Custom-Secret")+" "+r.Header.Get("Authorization")+" "+string(body))
		tr.mu.Unlock()
	}))
	t.Cleanup(tr.srv.Close)
	tr.origin = strings.Replace(tr.srv.URL, "127.0.0.1", "localhost", 1)
	tr.location = tr.origin + "/mcp/" + strings.Repeat("p", 4000) + "?token=query-token-1234"
	return tr
}

// check fails t when text, an error shown to users, does not say the redirect was refused and
// where to, or quotes the Location's path or query, or when anything reached the trap.
func (tr *redirectTrap) check(t *testing.T, what, text string) {
	t.Helper()
	if !strings.Contains(text, "refused a redirect") || !strings.Contains(text, tr.origin) {
		t.Errorf("%s %.300q: want it to say the redirect to %s was refused", what, text, tr.origin)
	}
	if strings.Contains(text, "query-token") || strings.Contains(text, "/mcp/ppp") {
		t.Errorf("%s %.300q quotes the Location's path or query", what, text)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.got) > 0 {
		t.Errorf("the redirect's target got %d requests: %.300q", len(tr.got), tr.got)
	}
}

// TestRedirectRefusedReasonShown: a refused redirect failed with Go's *url.Error, which quotes
// the Location whole (path and query) before the refusal: a long one, a hostile server's
// choice, had the reason cut out of the status (and of a tools/call's error), which said only
// "Post "http://...pppp", and a short one had its query (a token) quoted. The refusal is shown
// on its own, naming the target's origin only.
func TestRedirectRefusedReasonShown(t *testing.T) {
	t.Parallel()
	hdr := map[string]string{"Authorization": "Bearer tok-redir-1", "X-Custom-Secret": "sek-redir-1"}

	for _, tp := range []string{TransportHTTP, TransportSSE} {
		t.Run("handshake-"+tp, func(t *testing.T) {
			t.Parallel()
			tr := newRedirectTrap(t)
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tr.location, http.StatusTemporaryRedirect)
			}))
			t.Cleanup(redirector.Close)
			h := run(t, nil, fastConfig(ServerConfig{Name: "redir", Transport: tp, URL: redirector.URL + "/mcp", Headers: hdr}))
			rec := record(t, h.env, subjects.RegistryServer("redir"))
			st := rec.wait(0, "ready or unavailable", settled).ev.Status
			if st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeConnectFailed {
				t.Errorf("status %s %s, want unavailable %s", st.Status, st.Code, subjects.CodeConnectFailed)
			}
			tr.check(t, "status reason", st.Reason)
		})
	}

	for _, sse := range []bool{false, true} {
		name := "call"
		if sse {
			name = "sse-call"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := newRedirectTrap(t)
			var hostile atomic.Bool
			var inner http.Handler
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hostile.Load() && r.Method == http.MethodPost {
					http.Redirect(w, r, tr.location, http.StatusPermanentRedirect) // the body would go too
					return
				}
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			sc := ServerConfig{Name: "gw", URL: ts.URL + "/mcp", Headers: hdr}
			if sse {
				s := server.NewSSEServer(newFixture(fixtureOptions{}))
				server.WithBaseURL(ts.URL)(s)
				inner = s
				sc = ServerConfig{Name: "gw", Transport: TransportSSE, URL: ts.URL + "/sse", Headers: hdr}
			} else {
				inner = server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))
			}
			h := run(t, nil, fastConfig(sc))
			rec := record(t, h.env, subjects.RegistryServer("gw"))
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			hostile.Store(true)
			r := dispatch(t, h, "gw", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"an argument"}`)})
			if r.Error == nil {
				t.Fatalf("call redirected elsewhere: result %s, want an error", r.Result)
			}
			tr.check(t, "call error "+r.Error.Code, r.Error.Message)
		})
	}
}
