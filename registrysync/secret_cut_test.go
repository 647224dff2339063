package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSecretCutBeforeRedactionNotLeaked: the connector quotes a server's words cut short in
// places (a schema's "type" at 40 bytes, a repeated cursor at 80), and redacts the message only
// later, as it is published: a configured secret that straddled the cut was cut in two, and its
// first bytes, no longer the value, were published as they were (in the rejected definition of
// the snapshot; in the status reason and the log). A hostile or buggy server that puts our
// credential there (a cursor encoding its request, headers included) hands them to every
// reader of the registry stream.
func TestSecretCutBeforeRedactionNotLeaked(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-Cut4Secret0123456789"
	leaked := secret[:14] // what a cut would leave of it
	srv := server.NewMCPServer("cut", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("ok"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	inner := server.NewStreamableHTTPServer(srv)
	// mode "schema": tools/list holds a tool whose schema's type is a string quoted cut at 40
	// bytes; mode "cursor": tools/list always answers the same next cursor, quoted cut at 80.
	fake := func(mode string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == "tools/list" {
				var result string
				switch mode {
				case "schema":
					// The raw "type" is quoted: `"` + 25 bytes, then the secret from byte 26.
					typ := strings.Repeat("t", 25) + secret
					result = fmt.Sprintf(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":{"type":%q}}]}`, typ)
				case "cursor":
					cursor := strings.Repeat("c", 66) + secret
					result = fmt.Sprintf(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}}],"nextCursor":%q}`, cursor)
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			inner.ServeHTTP(w, r)
		}))
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	h, logs := runLogged(t, fastConfig(
		ServerConfig{Name: "schema", Transport: TransportHTTP, URL: fake("schema"), Headers: map[string]string{"Authorization": "Bearer " + secret}},
		ServerConfig{Name: "cursor", Transport: TransportHTTP, URL: fake("cursor"), Headers: map[string]string{"Authorization": "Bearer " + secret}},
	))
	schema := record(t, h.env, subjects.RegistryServer("schema"))
	cursor := record(t, h.env, subjects.RegistryServer("cursor"))
	schema.wait(0, "the tools snapshot with its rejected definition", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
		return len(s.Rejected) > 0
	}))
	cursor.wait(0, "the repeated cursor's failure", func(e event) bool { return strings.Contains(string(e.data), "repeated cursor") })
	for _, ev := range append(schema.all(), cursor.all()...) {
		if strings.Contains(string(ev.data), leaked) {
			t.Errorf("a registry event holds the start of the secret (%q): %s", leaked, ev.data)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, leaked) {
			t.Errorf("log line holds the start of the secret: %s", line)
		}
	}
}

// TestStderrLineCutBeforeRedactionNotLeaked: a stderr line longer than the reader's buffer is
// kept to its first 4 KiB, then redacted, then cut to 300 bytes. Redaction shortens it (a long
// credential quoted again and again becomes "[redacted]" each time), so the copy that straddled
// the 4 KiB cut, no longer whole, came within the 300 bytes quoted in the status reason and the
// log.
func TestStderrLineCutBeforeRedactionNotLeaked(t *testing.T) {
	needSh(t)
	t.Parallel()
	secret := "tok-" + strings.Repeat("Q7wz", 50) + "K" // 205 bytes
	leaked := secret[:40]
	sc := ServerConfig{Name: "longline", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `line="auth failed: "; i=0; while [ $i -lt 100 ]; do line="$line$MY_API_TOKEN"; i=$((i+1)); done; echo "$line" >&2; exit 1`},
		Env:  map[string]string{"MY_API_TOKEN": secret}}
	h, logs := runLoggedAt(t, fastConfig(sc), zerolog.DebugLevel)
	rec := record(t, h.env, subjects.RegistryServer("longline"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if !strings.Contains(e.ev.Status.Reason, "auth failed: [redacted]") {
		t.Errorf("status reason %q: want the stderr line, redacted", e.ev.Status.Reason)
	}
	stdioFailureWarning(t, logs, "exit status 1")
	for _, ev := range rec.all() {
		if strings.Contains(string(ev.data), leaked) {
			t.Errorf("a registry event holds the start of the secret: %s", ev.data)
		}
	}
	if strings.Contains(logs.String(), leaked) {
		t.Errorf("the start of the secret reached the log:\n%s", logs.String())
	}
}
