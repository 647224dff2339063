package executor

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// A 2026-07-28 list with ttlMs 0 (mcp-go servers send it unless configured otherwise, and so does
// the conformance suite's server) is stale as soon as it is listed: a call re-lists first, and
// runs once that re-list, made for it, found the list unchanged. It was refused unavailable ("the
// re-list did not confirm the list"): the list confirmed at the re-list had a TTL of 0, run out
// again by the time it was looked at, so no tool of such a server could ever be called.
func TestTTLZeroListIsCallable(t *testing.T) {
	srv := server.NewMCPServer("zero", "1.0.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("add", mcp.WithNumber("a"), mcp.WithNumber("b"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("sum"), nil
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	relists := &counter{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true, extra: []registrysync.ServerConfig{
		{Name: "zero", Transport: registrysync.TransportHTTP, URL: ts.URL + "/mcp"},
	}})
	r.startExecutor(Config{Dispatcher: r.mgr, Relister: countingRelister{inner: r.mgr, n: relists}}, r.env.NC)
	r.waitTool("zero__add")
	if got := r.ex.reg.lookup("zero__add"); got == nil {
		t.Fatal("zero__add not listed")
	}
	for i := range 2 {
		if res := r.call("local", "zero__add", `{"a":2,"b":3}`); res.Status != subjects.CallOK {
			t.Fatalf("call %d of a tool whose list has ttlMs 0: %s %+v, want ok after a re-list", i, res.Status, res.Error)
		}
	}
	if got := relists.get("zero"); got < 2 {
		t.Errorf("%d re-lists for 2 calls, want one before each (ttlMs 0: always stale)", got)
	}
}
