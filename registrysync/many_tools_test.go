package registrysync

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// manyToolsServer serves n tools of about 270 bytes each over streamable HTTP.
func manyToolsServer(t *testing.T, n int) string {
	t.Helper()
	srv := server.NewMCPServer("many", "1.0", server.WithToolCapabilities(true))
	for i := range n {
		srv.AddTool(mcp.NewTool(fmt.Sprintf("tool_%05d", i), mcp.WithDescription("a tool that does a thing with a number"), mcp.WithNumber("x", mcp.Required())),
			func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
	return httpFixture(t, srv)
}

// TestToolsListOverMaxPayloadSaysWhy: a server's tools list is one registry event, so a NATS
// server of the default 1 MiB max_payload cannot carry the list of a server of a few thousand
// tools (5,000 here, 1.3 MB; 9,000, 2.4 MB, whose one page is over what a list reads). The
// server is unavailable snapshot_too_large, rightly, but the reason named only a byte count
// ("tools/list: failed to decode response: the server's answer is too large (over 2093056
// bytes)", twice the max_payload): nothing said that max_payload binds, nor that the streams
// take 8 MiB messages. The reason says so.
func TestToolsListOverMaxPayloadSaysWhy(t *testing.T) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	h := run(t, env, fastConfig(
		ServerConfig{Name: "many", Transport: "http", URL: manyToolsServer(t, 5000)},
		ServerConfig{Name: "more", Transport: "http", URL: manyToolsServer(t, 9000)}))
	for _, name := range []string{"many", "more"} {
		rec := record(t, h.env, subjects.RegistryServer(name))
		st := rec.wait(0, name+" ready or unavailable", settled).ev.Status
		if st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeSnapshotTooLarge {
			t.Fatalf("%s: status %s %s %q, want unavailable %s", name, st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
		}
		if !strings.Contains(st.Reason, "max_payload is 1048576") || !strings.Contains(st.Reason, fmt.Sprint(subjects.MaxEventBytes)) {
			t.Errorf("%s: reason %q does not say that the NATS server's max_payload (1048576) binds, nor what mcpstream takes (%d)", name, st.Reason, subjects.MaxEventBytes)
		}
		t.Logf("%s: %s", name, st.Reason)
	}
}
