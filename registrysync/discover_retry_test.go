package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// discoverFlaky serves next, but fails the first failDiscover server/discover POSTs and counts
// every server/discover it sees. It fails one with a 503 without Retry-After (a gateway
// shedding load, a replica restarting) or, slow set, by opening its event stream and answering nothing until the client
// gives up (the probe waits half of ConnectTimeout: discoverTimeout).
//
// With legacy set it answers every server/discover with JSON-RPC -32601 (method not found), as
// a server that predates 2026-07-28 does.
type discoverFlaky struct {
	next         http.Handler
	slow, legacy bool
	failDiscover atomic.Int32
	discovers    atomic.Int32
}

func (d *discoverFlaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodServerDiscover) {
			d.discovers.Add(1)
			if d.legacy {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
				return
			}
			if d.failDiscover.Add(-1) >= 0 {
				if d.slow {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					<-r.Context().Done()
					return
				}
				// No Retry-After: with one, initialize is not sent before it (discoverWait).
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
		}
	}
	d.next.ServeHTTP(w, r)
}

// A server/discover that fails once for a passing reason (HTTP 503) makes mcp-go fall back to
// initialize for that connection: a 2026-07-28 server that also serves legacy clients (as
// mcp-go's does) is then spoken to at 2025-11-25. That much is mcp-go's (one Client per
// connection). The connector used to remember the legacy protocol for every later reconnect
// (legacyHTTP, pinning the transport to initialize), so one 503 kept the server on the legacy
// protocol until the process restarted. A reconnect probes server/discover again.
func TestTransientDiscoverFailureNotSticky(t *testing.T) {
	t.Parallel()
	for _, slow := range []bool{false, true} {
		name := "503"
		if slow {
			name = "slow" // (the probe waits 10 s: half of fastConfig's ConnectTimeout)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sw := &swappable{}
			sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
			fl := &discoverFlaky{next: sw, slow: slow}
			fl.failDiscover.Store(1)
			ts := httptest.NewServer(fl)
			t.Cleanup(ts.Close)

			h := run(t, nil, fastConfig(ServerConfig{Name: "flaky", URL: ts.URL + "/mcp"}))
			rec := record(t, h.env, subjects.RegistryServer("flaky"))
			first := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			if p := first.ev.Status.Protocol; p == mcp.LATEST_PROTOCOL_VERSION {
				t.Fatalf("first connection negotiated %s although server/discover failed: the fixture does not test the fallback", p)
			}

			// The server restarts: the legacy session is gone (404), and the connector reconnects.
			sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
			relist(t, h, "flaky", subjects.RelistRequest{V: 1})
			lost := rec.wait(first.seq, "connection_lost", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
			again := rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
			if p := again.ev.Status.Protocol; p != mcp.LATEST_PROTOCOL_VERSION {
				t.Errorf("after reconnecting the protocol is %s (server/discover sent %d times in all); want %s: one failed discover made the fallback sticky",
					p, fl.discovers.Load(), mcp.LATEST_PROTOCOL_VERSION)
			}
		})
	}
}

// A server that says it is legacy (server/discover answered -32601, as mcp-go's legacy-only
// servers and lax ones do) is still remembered: its reconnections go straight to initialize
// with the GET stream, no server/discover sent again.
func TestLegacyAnswerRemembered(t *testing.T) {
	t.Parallel()
	sw := &swappable{}
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	fl := &discoverFlaky{next: sw, legacy: true}
	ts := httptest.NewServer(fl)
	t.Cleanup(ts.Close)

	h := run(t, nil, fastConfig(ServerConfig{Name: "legacy", URL: ts.URL + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("legacy"))
	first := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	relist(t, h, "legacy", subjects.RelistRequest{V: 1})
	lost := rec.wait(first.seq, "connection_lost", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
	again := rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
	if p := again.ev.Status.Protocol; p != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Errorf("after reconnecting the protocol is %s; want %s", p, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	if n := fl.discovers.Load(); n != 1 {
		t.Errorf("server/discover sent %d times; want once (the server said it is legacy)", n)
	}
}
