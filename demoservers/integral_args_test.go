package demoservers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestIntegralArgumentsWrittenAsFloats: an integer argument written with a fraction or an
// exponent ("topK": 2.0, "limit": 1e1, as a client that keeps numbers as floats writes them:
// Python's json.dumps of 2.0) is an integer to JSON Schema, so the input schema validation
// takes it and mcpstream's executor passes it on as written; the tool must run as with 2 and
// 10. encoding/json refuses 2.0 for an int field: every such call answered "invalid arguments".
// A fractional value stays refused, by the schema.
func TestIntegralArgumentsWrittenAsFloats(t *testing.T) {
	opts := testOptions(t)
	opts.ControlFile = filepath.Join(t.TempDir(), "control.json")
	if err := os.WriteFile(opts.ControlFile, []byte(`{"add":["summarize_document","tailLogs"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	call := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}, name, args string) *mcp.CallToolResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), failSafe)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = json.RawMessage(args) // sent as written
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("call %s(%s): %v", name, args, err)
		}
		return res
	}
	count := func(res *mcp.CallToolResult, member string) int {
		t.Helper()
		b, _ := json.Marshal(res.StructuredContent)
		var out map[string][]json.RawMessage
		json.Unmarshal(b, &out)
		return len(out[member])
	}
	for _, kind := range []string{"stdio", "http", "inprocess"} {
		for _, tc := range []struct {
			server, tool, args, member string
			want                       int
		}{
			{"kb", "search_knowledge_base", `{"query":"refund policy","topK":2.0}`, "results", 2},
			{"kb", "search_knowledge_base", `{"query":"refund policy","topK":1e0}`, "results", 1},
			{"ticketing", "listIssues", `{"limit":1E1}`, "issues", 0},
			{"logging", "getLogs", `{"level":"info","since":0,"limit":3.00}`, "entries", 3},
			{"logging", "tailLogs", `{"n":4e0}`, "entries", 4},
		} {
			c := connect(t, kind, tc.server, opts)
			res := call(c, tc.tool, tc.args)
			if res.IsError {
				t.Errorf("%s: %s %s: isError: %s", kind, tc.tool, tc.args, resultText(res))
				continue
			}
			if got := count(res, tc.member); got != tc.want {
				t.Errorf("%s: %s %s: %d %s, want %d", kind, tc.tool, tc.args, got, tc.member, tc.want)
			}
		}
	}
	c := connect(t, "stdio", "kb", opts)
	if res := call(c, "summarize_document", `{"id":"POL-TRAVEL","maxSentences":1.0}`); res.IsError {
		t.Errorf("summarize_document maxSentences 1.0: isError: %s", resultText(res))
	}
	if res := call(c, "search_knowledge_base", `{"query":"refund policy","topK":2.5}`); !res.IsError {
		t.Errorf("search_knowledge_base topK 2.5: not refused")
	}
}

// TestGetLogsSinceFraction: since is a number of milliseconds, which may have a fraction
// (performance.timeOrigin + performance.now() in a browser); an entry logged at T is before
// T+0.5 and must not be returned for "at or after T+0.5". Truncating since to T returned it.
func TestGetLogsSinceFraction(t *testing.T) {
	c := connect(t, "inprocess", "logging", testOptions(t))
	all := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": 0})
	if len(all.Entries) == 0 {
		t.Fatal("no info entries")
	}
	newest := all.Entries[0].Timestamp
	got := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": float64(newest) + 0.5})
	for _, e := range got.Entries {
		if e.Timestamp < newest+1 {
			t.Errorf("getLogs since %d.5 returned an entry of %d", newest, e.Timestamp)
		}
	}
	stats := callOK[gotStats](t, c, "getLogStats", map[string]any{"since": float64(newest) + 0.5})
	if stats.Oldest != 0 && stats.Oldest < newest+1 {
		t.Errorf("getLogStats since %d.5: oldest entry %d", newest, stats.Oldest)
	}
}
