package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestHeaderToolsReadExactNames: the connector mirrored arguments into Mcp-Param-* headers from
// the tools decoded by encoding/json into mcp-go's types, which match member names up to case
// (the last of "name" and "Name" winning), while the catalog, the executor's validation and
// every other reader of a definition read the exact names. A server could so bind a header to
// an argument of a tool whose inputSchema, as everyone else sees it, binds none, or give one
// tool's bindings to another. The bindings are read from the members the catalog reads.
func TestHeaderToolsReadExactNames(t *testing.T) {
	t.Parallel()
	plain := `{"type":"object","properties":{"region":{"type":"string"}}}`
	bound := `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`
	for _, tc := range []struct {
		name  string
		items []string
		want  []string // the tools with header bindings
	}{
		{"exact", []string{`{"name":"where","inputSchema":` + bound + `}`}, []string{"where"}},
		{"InputSchema", []string{`{"name":"where","inputSchema":` + plain + `,"InputSchema":` + bound + `}`}, nil},
		{"Name", []string{`{"name":"decoy","inputSchema":` + plain + `,"Name":"where"}`,
			`{"name":"other","inputSchema":` + bound + `,"Name":"where"}`}, []string{"other"}},
		{"Properties", []string{`{"name":"where","inputSchema":{"type":"object","properties":{"region":{"type":"string"}},"Properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`}, nil},
		{"X-MCP-Header", []string{`{"name":"where","inputSchema":{"type":"object","properties":{"region":{"type":"string","X-MCP-Header":"Region"}}}}`}, nil},
		{"Type", []string{`{"name":"where","inputSchema":{"type":"object","properties":{"region":{"Type":"string","x-mcp-header":"Region"}}}}`}, nil},
		{"nested", []string{`{"name":"where","inputSchema":{"type":"object","properties":{"loc":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}}}`}, []string{"where"}},
		{"nested Properties", []string{`{"name":"where","inputSchema":{"type":"object","properties":{"loc":{"type":"object","Properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}}}`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := make([]json.RawMessage, len(tc.items))
			for i, s := range tc.items {
				items[i] = json.RawMessage(s)
			}
			var got []string
			for name := range headerTools(items) {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("tools with header bindings = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParamHeadersFromCatalogSchema: end to end, a server listing a tool whose inputSchema binds
// no header, and an "InputSchema" member that binds one: its calls carried the argument in an
// Mcp-Param-Region header the catalog's schema declares nowhere.
func TestParamHeadersFromCatalogSchema(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	plain := `{"type":"object","properties":{"region":{"type":"string"}},"required":["region"]}`
	srv.AddTool(mcp.NewToolWithRawSchema("where", "Echoes the region.", json.RawMessage(plain)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("region", "")), nil
		})
	list := `[{"name":"where","description":"Echoes the region.","inputSchema":` + plain +
		`,"InputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]`
	var mu sync.Mutex
	var calls int
	var headers []string
	inner := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Mcp-Method") {
		case "tools/call":
			mu.Lock()
			calls++
			if v := r.Header.Get("Mcp-Param-Region"); v != "" {
				headers = append(headers, v)
			}
			mu.Unlock()
		case "tools/list":
			body, _ := io.ReadAll(r.Body)
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(body, &req) != nil {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}`, req.ID, list)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "ph", Transport: TransportHTTP, URL: ts.URL + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("ph"))
	if e := rec.wait(0, "ready", settled); e.ev.Status.Status != subjects.StatusReady || e.ev.Status.Protocol != mcp.ProtocolVersion20260728 {
		t.Fatalf("status %+v, want ready on 2026-07-28", e.ev.Status)
	}
	e := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, func(*subjects.Snapshot) bool { return true }))
	if n := names(t, e.ev.Snapshot); len(n) != 1 || n[0] != "where" || strings.Contains(string(e.ev.Snapshot.Items[0]), `"inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header"`) {
		t.Fatalf("snapshot %s, want the tool where, its inputSchema binding no header", e.ev.Snapshot.Items)
	}
	r := h.m.Dispatch(context.Background(), "ph", subjects.DispatchRequest{V: 1, Tool: "where", Arguments: json.RawMessage(`{"region":"eu-west"}`)})
	if r.Error != nil {
		t.Fatalf("call: %+v", r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || len(headers) != 0 {
		t.Errorf("%d calls, Mcp-Param-Region headers %q: want 1 call and none (the catalog's inputSchema binds no header)", calls, headers)
	}
}

// TestHeaderToolsDepthBounded: mcp-go reads a tool's bindings again on every tools/call, in
// time that grows with the square of the schema's depth, so a hostile server's thousands of
// nested properties would cost the connector's CPU on each call. Bindings are mirrored down to
// maxHeaderDepth levels of arguments; the schema handed to mcp-go holds no deeper properties.
func TestHeaderToolsDepthBounded(t *testing.T) {
	t.Parallel()
	// nested is an inputSchema whose property "a" nests depth levels of properties, the
	// deepest carrying an x-mcp-header binding.
	nested := func(depth int) string {
		leaf := `{"type":"string","x-mcp-header":"Deep"}`
		for range depth - 1 {
			leaf = `{"type":"object","properties":{"a":` + leaf + `}}`
		}
		return `{"type":"object","properties":{"a":` + leaf + `}}`
	}
	item := func(schema string) json.RawMessage {
		return json.RawMessage(`{"name":"t","inputSchema":` + schema + `}`)
	}
	if tools := headerTools([]json.RawMessage{item(nested(maxHeaderDepth))}); tools["t"] == nil ||
		len(mcp.ExtractParamHeaderBindings(tools["t"])) != 1 {
		t.Fatalf("a binding at level %d: tools %v, want it mirrored", maxHeaderDepth, tools)
	}
	if tools := headerTools([]json.RawMessage{item(nested(maxHeaderDepth + 1))}); tools["t"] != nil {
		t.Errorf("a binding at level %d: bindings %v, want none (deeper than maxHeaderDepth)", maxHeaderDepth+1,
			mcp.ExtractParamHeaderBindings(tools["t"]))
	}
	// A shallow binding beside thousands of levels: mirrored, from a schema cut at the bound.
	deep := `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"a":` +
		strings.TrimSuffix(strings.TrimPrefix(nested(3000), `{"type":"object","properties":{"a":`), `}}`) + `}}`
	tools := headerTools([]json.RawMessage{item(deep)})
	if tools["t"] == nil || len(mcp.ExtractParamHeaderBindings(tools["t"])) != 1 {
		t.Fatalf("a shallow binding beside a deep schema: want it mirrored, got %v", tools)
	}
	if n := strings.Count(string(tools["t"].RawInputSchema), `"properties"`); n > maxHeaderDepth {
		t.Errorf("the schema handed to mcp-go nests %d levels of properties, want at most %d", n, maxHeaderDepth)
	}
}
