package registrysync

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// negotiationServer is a streamable HTTP MCP server for the edges of version negotiation, shaped
// like the conformance suite's client scenarios (initialize, sse-retry, request-metadata). It
// records the method and MCP-Protocol-Version header of every POST.
//
//	legacy-lax     a 2025-11-25 server that answers any method it does not know, server/discover
//	               included, with an empty result
//	reject-first   a 2026-07-28 server that refuses the first request it gets with -32022,
//	               listing 2026-07-28 (the version asked for) as supported
//	reject-always  refuses every server/discover with -32022 listing 2026-07-28 (the version
//	               asked for), and answers initialize as a 2025-11-25 server
//	mute-discover  a 2025-11-25 server that never answers server/discover (it holds the POST
//	               until the client gives up), and answers initialize
//	modern         a 2026-07-28 server that accepts the first request (reject-first without
//	               the refusal), whose tools/list results carry hints
type negotiationServer struct {
	mode string
	// hints are the cache hints of a tools/list result of a 2026-07-28 mode (nil: ttlMs 0,
	// cacheScope private), written as they are: a hostile server's odd values.
	hints map[string]any
	mu    sync.Mutex
	seen  []string // "method header" of each POST
}

func (s *negotiationServer) posts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func (s *negotiationServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &req) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	header := r.Header.Get("MCP-Protocol-Version")
	s.mu.Lock()
	first := len(s.seen) == 0
	s.seen = append(s.seen, req.Method+" "+header)
	s.mu.Unlock()
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(status int, member string, v any) {
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, member: v})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(out)
	}
	tools := []any{map[string]any{"name": "t", "inputSchema": map[string]any{"type": "object"}}}
	switch s.mode {
	case "legacy-lax":
		switch req.Method {
		case "initialize":
			answer(200, "result", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "lax", "version": "1"}})
		case "tools/list":
			answer(200, "result", map[string]any{"tools": tools})
		default:
			answer(200, "result", map[string]any{})
		}
	case "reject-always":
		switch req.Method {
		case "server/discover":
			answer(400, "error", map[string]any{"code": -32022, "message": "Unsupported protocol version",
				"data": map[string]any{"supported": []string{"2026-07-28"}, "requested": header}})
		case "initialize":
			answer(200, "result", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "contrary", "version": "1"}})
		case "tools/list":
			answer(200, "result", map[string]any{"tools": tools})
		default:
			answer(200, "result", map[string]any{})
		}
	case "mute-discover":
		switch req.Method {
		case "server/discover":
			<-r.Context().Done()
		case "initialize":
			answer(200, "result", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "mute", "version": "1"}})
		case "tools/list":
			answer(200, "result", map[string]any{"tools": tools})
		default:
			answer(200, "result", map[string]any{})
		}
	case "reject-first", "modern":
		if first && s.mode == "reject-first" {
			answer(400, "error", map[string]any{"code": -32022, "message": "Unsupported protocol version",
				"data": map[string]any{"supported": []string{"2026-07-28"}, "requested": header}})
			return
		}
		switch req.Method {
		case "server/discover":
			answer(200, "result", map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}},
				"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
				"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "strict", "version": "1"}}})
		case "tools/list":
			res := map[string]any{"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
			if s.hints != nil {
				delete(res, "ttlMs")
				delete(res, "cacheScope")
				for k, v := range s.hints {
					res[k] = v
				}
			}
			answer(200, "result", res)
		default:
			answer(200, "result", map[string]any{"resultType": "complete"})
		}
	}
}

// TestDiscoverNegotiationEdges: the version the connector settles on is one the server said it
// supports. A legacy server that answers server/discover with an empty result (no
// supportedVersions) is legacy: it gets the initialize handshake, not 2026-07-28 requests (mcp-go
// took any discover result for a modern server, and never initialized: the conformance suite's
// initialize scenario recorded nothing). A modern server that refuses the version it lists as
// supported is asked again with it, and never gets a legacy initialize (mcp-go fell back to one,
// without MCP-Protocol-Version or _meta, and the connection failed once: the request-metadata
// scenario).
func TestDiscoverNegotiationEdges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, protocol string
		wantInit       bool
		discovers      int // server/discover POSTs of the first connection, 0: not checked
	}{
		{"legacy-lax", mcp.LATEST_LEGACY_PROTOCOL_VERSION, true, 0},
		{"reject-first", mcp.ProtocolVersion20260728, false, 0},
		// Asked again once, not in a loop: then the initialize fallback.
		{"reject-always", mcp.LATEST_LEGACY_PROTOCOL_VERSION, true, 2},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			srv := &negotiationServer{mode: tc.mode}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			h := run(t, nil, fastConfig(ServerConfig{Name: "neg", Transport: TransportHTTP, URL: ts.URL, Kinds: []string{"tools"}}))
			rec := record(t, h.env, subjects.RegistryServer("neg"))
			snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
			if snap.Info == nil || snap.Info.Protocol != tc.protocol {
				t.Errorf("serverInfo = %+v, want protocol %s", snap.Info, tc.protocol)
			}
			for _, e := range rec.all() {
				if st := e.ev.Status; st != nil && st.Status != subjects.StatusReady && st.Status != subjects.StatusConnecting {
					t.Errorf("status %s %s: %s, want connecting and ready only (no failed connection)", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
				}
			}
			posts := srv.posts()
			initialized := slices.ContainsFunc(posts, func(p string) bool { return strings.HasPrefix(p, "initialize ") })
			if initialized != tc.wantInit {
				t.Errorf("initialize sent = %v, want %v; POSTs: %q", initialized, tc.wantInit, posts)
			}
			if tc.discovers > 0 {
				n := 0
				for _, p := range posts {
					if strings.HasPrefix(p, "server/discover ") {
						n++
					}
				}
				if n != tc.discovers {
					t.Errorf("%d server/discover POSTs, want %d; POSTs: %q", n, tc.discovers, posts)
				}
			}
			if !tc.wantInit {
				for _, p := range posts {
					if !strings.HasSuffix(p, " "+tc.protocol) {
						t.Errorf("POST %q: want MCP-Protocol-Version %s on every request; POSTs: %q", p, tc.protocol, posts)
					}
				}
			}
		})
	}
}

// TestOddCacheHints: a server's odd cache hints reach the snapshot by the documented rules, not
// as absent: a negative ttlMs is expired at once (0), and a cacheScope other than public,
// "Private" or an unknown word, is private. Read as absent, the list never expired, and a
// private list was shown to every principal.
func TestOddCacheHints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hints map[string]any
		ttl   int64 // -1: absent
		scope string
	}{
		{"negative ttl, scope in another case", map[string]any{"ttlMs": -5, "cacheScope": "Private"}, 0, subjects.ScopePrivate},
		{"unknown scope", map[string]any{"ttlMs": 60000, "cacheScope": "shared"}, 60000, subjects.ScopePrivate},
		{"scope not a string", map[string]any{"ttlMs": 1.5, "cacheScope": 7}, 1, subjects.ScopePrivate},
		{"hints absent", map[string]any{}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(&negotiationServer{mode: "modern", hints: tc.hints})
			t.Cleanup(ts.Close)
			h := run(t, nil, fastConfig(ServerConfig{Name: "odd", Transport: TransportHTTP, URL: ts.URL, Kinds: []string{"tools"}}))
			rec := record(t, h.env, subjects.RegistryServer("odd"))
			snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
			if (tc.ttl < 0) != (snap.TTLMs == nil) || snap.TTLMs != nil && *snap.TTLMs != tc.ttl {
				t.Errorf("ttlMs = %v, want %d (-1: absent)", snap.TTLMs, tc.ttl)
			}
			if snap.CacheScope != tc.scope {
				t.Errorf("cacheScope = %q, want %q", snap.CacheScope, tc.scope)
			}
		})
	}
}
