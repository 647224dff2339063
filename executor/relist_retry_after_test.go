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

// heldRelister answers every re-list as a connector does while its server's Retry-After runs.
type heldRelister struct{}

func (heldRelister) Relist(context.Context, string, subjects.RelistRequest) subjects.RelistReply {
	return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeUnavailable,
		Message: "tools not re-listed: the server asked not to be asked again for 7s (HTTP 429 or 503 Retry-After)", RetryAfterMs: 7000}}
}

// A call of a tool whose list's TTL ran out while its server asks to be left alone (HTTP 429
// or 503 with Retry-After: the connector answers the executor's re-list with the wait left) is
// refused unavailable with that wait as its retryAfterMs: the caller was told "unavailable"
// with no hint of when to come back, and retried at once.
func TestExpiredListRelistHeldGivesRetryAfter(t *testing.T) {
	srv := server.NewMCPServer("zero", "1.0.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("add", mcp.WithNumber("a"), mcp.WithNumber("b"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("sum"), nil
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true, extra: []registrysync.ServerConfig{
		{Name: "zero", Transport: registrysync.TransportHTTP, URL: ts.URL + "/mcp"},
	}})
	r.startExecutor(Config{Dispatcher: r.mgr, Relister: heldRelister{}}, r.env.NC)
	r.waitTool("zero__add")
	res := r.call("local", "zero__add", `{"a":2,"b":3}`)
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable || res.Error.RetryAfterMs != 7000 {
		t.Fatalf("a call whose re-list is held by its server's Retry-After: %s %+v, want refused unavailable with retryAfterMs 7000", res.Status, res.Error)
	}
}
