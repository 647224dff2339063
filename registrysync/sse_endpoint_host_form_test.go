package registrysync

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSSEEndpointHostWrittenOtherwise: a legacy SSE server's endpoint event may name the
// configured URL's origin in another form, its default port written out or left out
// (http://127.0.0.1:80/message for http://127.0.0.1/sse, an https server configured with
// :443...). mcp-go compares the hosts as written and ignored such an endpoint, waiting for
// another until ConnectTimeout, though the origin check (sseRequests.endpointElsewhere) let it
// through as the configured origin it is: the connection now succeeds.
//
// Not parallel: port 80 is reached by swapping http.DefaultTransport, which sessions clone,
// for one that dials the test server whatever port 127.0.0.1 is asked for.
func TestSSEEndpointHostWrittenOtherwise(t *testing.T) {
	for _, tc := range []struct{ name, configured, base string }{
		{"default port written out", "http://127.0.0.1/sse", "http://127.0.0.1:80"},
		{"default port left out", "http://127.0.0.1:80/sse", "http://127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFixture(fixtureOptions{})
			sse := server.NewSSEServer(srv, server.WithBaseURL(tc.base))
			ts := httptest.NewServer(sse)
			t.Cleanup(ts.Close)

			prev := http.DefaultTransport
			tr := prev.(*http.Transport).Clone()
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, ts.Listener.Addr().String())
			}
			http.DefaultTransport = tr
			t.Cleanup(func() { http.DefaultTransport = prev })

			cfg := fastConfig(ServerConfig{Name: "hostform", Transport: TransportSSE, URL: tc.configured})
			cfg.ConnectTimeout = 10 * time.Minute // longer than the wait below: only connecting passes
			h := run(t, nil, cfg)
			rec := record(t, h.env, subjects.RegistryServer("hostform"))
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
		})
	}
}

// The endpoint event of the configured origin written in another form is passed on with the
// configured URL's host as written, which is what mcp-go compares it with; one written as
// configured, or relative, is passed on as it came.
func TestSSEEndpointAsConfigured(t *testing.T) {
	for _, tc := range []struct{ configured, endpoint, want string }{
		{"http://[::1]/sse", "http://[::1]:80/message?sessionId=1", "http://[::1]/message?sessionId=1"},
		{"https://[::1]:443/sse", "https://[::1]/message?sessionId=1", "https://[::1]:443/message?sessionId=1"},
		{"http://mcp.example/sse", "HTTP://MCP.Example:80/message?sessionId=1", "http://mcp.example/message?sessionId=1"},
		{"http://mcp.example/sse", "//MCP.example/message", "//mcp.example/message"},
		{"http://mcp.example/sse", "http://mcp.example/message?sessionId=1", "http://mcp.example/message?sessionId=1"},
		{"http://mcp.example:80/sse", "/message?sessionId=1", "/message?sessionId=1"},
	} {
		base, err := url.Parse(tc.configured)
		if err != nil {
			t.Fatal(err)
		}
		in := "event: endpoint\nid: 7\ndata: " + tc.endpoint + "\r\n\r\n"
		f := &sseRequests{src: io.NopCloser(strings.NewReader(in)), endpointBase: base, origin: origin(base), host: base.Host}
		out, err := io.ReadAll(f)
		if err != nil {
			t.Errorf("%s for %s: %v", tc.endpoint, tc.configured, err)
			continue
		}
		name, data, idLine := parseEvent(out)
		if name != "endpoint" || string(data) != tc.want || string(idLine) != "id: 7\n" {
			t.Errorf("%s for %s: passed on %q, want the endpoint event %q (its id kept)", tc.endpoint, tc.configured, out, tc.want)
		}
	}
}
