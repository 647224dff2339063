package demoservers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestServeStdioPipeline feeds a whole legacy session at once and closes the
// input, as `printf ... | mcpstream demo-server kb` would: every request is
// answered before ServeStdio returns.
func TestServeStdioPipeline(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search_knowledge_base","arguments":{"query":"travel"}}}`,
		`not json at all`,
		``,
	}, "\n")
	var out bytes.Buffer
	if err := ServeStdio(context.Background(), "kb", testOptions(t), strings.NewReader(in), &out); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	ids := map[string]bool{}
	parseErrors := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if m.Error != nil && m.Error.Code == mcp.PARSE_ERROR {
			parseErrors++
			continue
		}
		if m.Error != nil {
			t.Errorf("error response %s", sc.Text())
		}
		ids[string(m.ID)] = true
	}
	for _, id := range []string{"1", "2", "3"} {
		if !ids[id] {
			t.Errorf("no response to request %s; output:\n%s", id, out.String())
		}
	}
	if parseErrors != 1 {
		t.Errorf("%d parse error responses, want 1", parseErrors)
	}
}

func TestServeStdioStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, "logging", testOptions(t), inR, io.Discard) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after cancel = %v, want nil", err)
		}
	case <-time.After(failSafe):
		t.Fatal("ServeStdio did not return after cancel")
	}
}

func TestServeHTTPListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ServeHTTPListener(ctx, "ticketing", testOptions(t), ln) }()

	base := "http://" + ln.Addr().String()
	for _, tc := range []struct {
		name string
		new  func() (*client.Client, error)
	}{
		{"streamable", func() (*client.Client, error) { return client.NewStreamableHttpClient(base + "/mcp") }},
		{"sse", func() (*client.Client, error) { return client.NewSSEMCPClient(base + "/sse") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.new()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start(t, c)
			if got := toolNamesOf(listTools(t, c)); !slices.Equal(got, []string{"closeIssue", "createIssue", "listIssues"}) {
				t.Errorf("tools = %v", got)
			}
			callOK[gotIssue](t, c, "createIssue", map[string]any{"title": tc.name, "body": "", "priority": "low"})
		})
	}

	// Keep a listen stream open: shutdown must not wait for it.
	c, err := client.NewStreamableHttpClient(base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start(t, c)
	// Both transports share one server, so both tickets are there.
	if got := callOK[gotIssues](t, c, "listIssues", map[string]any{}); got.Total != 2 {
		t.Errorf("%d tickets, want 2", got.Total)
	}
	ch := watchNotifications(t, c)
	streamErr := make(chan error, 1)
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { streamErr <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitNotification(t, ch, mcp.MethodNotificationSubscriptionsAcknowledged)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeHTTPListener after cancel = %v, want nil", err)
		}
	case <-time.After(failSafe):
		t.Fatal("ServeHTTPListener did not return after cancel")
	}
	select {
	case err := <-streamErr:
		t.Logf("listen stream ended by shutdown: %v", err)
	case <-time.After(failSafe):
		t.Error("listen stream still open after shutdown")
	}
}

func TestServeHTTPBadAddress(t *testing.T) {
	if err := ServeHTTP(context.Background(), "kb", testOptions(t), "127.0.0.1:notaport"); err == nil {
		t.Error("ServeHTTP on a bad address succeeded")
	}
}
