package registrysync

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server that starts but never answers the handshake was reported as "initialize: transport
// error: context deadline exceeded", in its status and its warning alike: nothing said that the
// server never answered, after how long, nor what to check. The reason now says which
// handshake request went unanswered and for how long (ConnectTimeout), that a stdio server's
// process is running, and what to check.

// handshakeTimeoutReason waits for the first unavailable status of server and returns its
// reason, checking that it says the server did not answer method within a second.
func handshakeTimeoutReason(t *testing.T, h *harness, server, method string) string {
	t.Helper()
	rec := record(t, h.env, subjects.RegistryServer(server))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	reason := e.ev.Status.Reason
	if want := "the server did not answer " + method + " (the MCP handshake) within 1s"; !strings.Contains(reason, want) {
		t.Errorf("status reason %q: want it to say %q", reason, want)
	}
	if strings.Contains(reason, "deadline exceeded") || strings.Contains(reason, "transport error") {
		t.Errorf("status reason %q: still mcp-go's wording", reason)
	}
	return reason
}

// TestStdioSilentServerSaysNotAnswered: a stdio server that reads its stdin and never answers
// initialize (nor writes on stderr).
func TestStdioSilentServerSaysNotAnswered(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "silent", "rogue:silent")
	sc.ProtocolVersion = "2025-11-25"
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = time.Second
	h, logs := runLoggedAt(t, cfg, zerolog.InfoLevel)
	reason := handshakeTimeoutReason(t, h, "silent", "initialize")
	for _, want := range []string{"its process is running", "wrote nothing on stderr", "MCP server on stdin/stdout"} {
		if !strings.Contains(reason, want) {
			t.Errorf("status reason %q: want it to say %q", reason, want)
		}
	}
	stdioFailureWarning(t, logs, "did not answer initialize (the MCP handshake) within 1s")
}

// TestStdioSilentServerSaysNotAnsweredDiscover: on 2026-07-28 the handshake is server/discover.
func TestStdioSilentServerSaysNotAnsweredDiscover(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "silent", "rogue:silent")
	sc.ProtocolVersion = "2026-07-28"
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = time.Second
	h := run(t, nil, cfg)
	handshakeTimeoutReason(t, h, "silent", "server/discover")
}

// TestHTTPSilentServerSaysNotAnswered: an HTTP server that takes the initialize POST and never
// answers it.
func TestHTTPSilentServerSaysNotAnswered(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // the client gives up at ConnectTimeout
	}))
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "silent", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
	cfg.ConnectTimeout = time.Second
	h := run(t, nil, cfg)
	reason := handshakeTimeoutReason(t, h, "silent", "initialize")
	if want := "check that its URL is its MCP endpoint"; !strings.Contains(reason, want) {
		t.Errorf("status reason %q: want it to say %q", reason, want)
	}
}
