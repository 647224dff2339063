package registrysync

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// settled is the first status after connecting: ready or unavailable.
func settled(e event) bool {
	return e.ev.Status != nil && (e.ev.Status.Status == subjects.StatusReady || e.ev.Status.Status == subjects.StatusUnavailable)
}

// TestRedirectToOtherOriginRefused: a 307 to another origin was followed with every configured
// header (Go's client keeps custom headers across hosts, and Authorization across the ports of
// one host): a server, or whoever controls its responses, could collect the credentials. Two
// loopback listeners on different ports are two origins.
func TestRedirectToOtherOriginRefused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(server.NewStreamableHTTPServer(newFixture(fixtureOptions{})))
	t.Cleanup(other.Close)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		other.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(collector.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, collector.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	sc := ServerConfig{Name: "redir", Transport: TransportHTTP, URL: redirector.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer tok-redir", "X-Api-Key": "key-redir"}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("redir"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeConnectFailed ||
		!strings.Contains(st.Reason, "redirect") || !strings.Contains(st.Reason, "origin") {
		t.Errorf("status %s %s %q, want unavailable %s saying the redirect to another origin was refused",
			st.Status, st.Code, st.Reason, subjects.CodeConnectFailed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the other origin got %d requests, with credentials %q", len(leaked), leaked)
	}
}

// TestRedirectWithinOriginFollowed: a redirect to another path of the same origin is followed.
func TestRedirectWithinOriginFollowed(t *testing.T) {
	t.Parallel()
	mcpHandler := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "moved", Transport: TransportHTTP, URL: ts.URL + "/old"}))
	rec := record(t, h.env, subjects.RegistryServer("moved"))
	if e := rec.wait(0, "ready or unavailable", settled); e.ev.Status.Status != subjects.StatusReady {
		t.Errorf("status %s %s %q, want ready", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
	}
}

// TestParamHeadersMirrored: on a 2026-07-28 streamable HTTP session, a tools/call mirrors the
// arguments annotated x-mcp-header into Mcp-Param-* headers (SEP-2243), from the last tools
// listing. mcp-go does it from the lists it decoded; the connector hands it no list (see
// capture.go), so it does it itself.
func TestParamHeadersMirrored(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	srv.AddTool(mcp.NewToolWithRawSchema("where", "Echoes the region.",
		json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("region", "")), nil
		})
	var mu sync.Mutex
	var got []string
	inner := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			got = append(got, r.Header.Get("Mcp-Param-Region"))
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "ph", Transport: TransportHTTP, URL: ts.URL + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("ph"))
	if e := rec.wait(0, "ready", settled); e.ev.Status.Status != subjects.StatusReady || e.ev.Status.Protocol != mcp.ProtocolVersion20260728 {
		t.Fatalf("status %+v, want ready on 2026-07-28", e.ev.Status)
	}
	r := h.m.Dispatch(context.Background(), "ph", subjects.DispatchRequest{V: 1, Tool: "where", Arguments: json.RawMessage(`{"region":"eu-west"}`)})
	if r.Error != nil {
		t.Fatalf("call: %+v", r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "eu-west" {
		t.Errorf("Mcp-Param-Region of the calls = %q, want [eu-west]", got)
	}
}
