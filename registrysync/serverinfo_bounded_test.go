package registrysync

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestServerInfoBounded: a server whose serverInfo name and version are of hundreds of
// kilobytes (a hostile or broken one) has them published cut to maxServerInfoBytes, marked,
// redacted before the cut left a value in two: they went whole into every snapshot (each list
// event hundreds of kilobytes larger, a list near the bound refused as too large) and into the
// "connected" log line.
func TestServerInfoBounded(t *testing.T) {
	t.Parallel()
	const secret = "Qzk-Secret-77x"
	// (the secret straddles the cut: its start is not left either)
	huge := strings.Repeat("n", maxServerInfoBytes-4) + secret + strings.Repeat("x", 200<<10)
	srv := server.NewMCPServer(huge, "v"+huge, server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	sc := ServerConfig{Name: "info", Transport: TransportHTTP, URL: httpFixture(t, srv), Secrets: []string{secret}}
	h, logs := runLogged(t, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("info"))
	e := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	info := e.ev.Snapshot.Info
	if info == nil {
		t.Fatal("no serverInfo")
	}
	for what, got := range map[string]string{"name": info.Name, "version": info.Version} {
		if len(got) > maxServerInfoBytes+len(cutMark) || !strings.HasSuffix(got, cutMark) || strings.Contains(got, secret[:redact.MinLen]) {
			t.Errorf("serverInfo %s of %d bytes: %.80q…%q", what, len(got), got, got[max(0, len(got)-40):])
		}
	}
	waitUntil(t, "the connected log line", func() bool { return strings.Contains(logs.String(), `"message":"connected"`) })
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 4<<10 || strings.Contains(line, secret[:redact.MinLen]) {
			t.Errorf("log line of %d bytes: %.200q", len(line), line)
		}
	}
}
