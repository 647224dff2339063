package demoservers

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestParseControlTrailingData: a control file with a stray closing bracket or brace after
// its object, or the JSON null, is malformed (json.Decoder.More does not see a trailing '}' or
// ']'), so the current tools are kept rather than reset to the defaults.
func TestParseControlTrailingData(t *testing.T) {
	for _, in := range []string{
		`{"hide":["getLogs"]}}`,
		`{"hide":["getLogs"]}]`,
		`{"hide":["getLogs"]} }`,
		`null`,
	} {
		if got, err := ParseControl([]byte(in)); err == nil {
			t.Errorf("ParseControl(%q) = %+v, want an error", in, got)
		}
	}
}

// TestGetLogsSinceFarFuture: a since far beyond any entry (valid for the schema: minimum 0,
// no maximum) returns nothing; converting it to int64 used to wrap to the most negative
// value, which returned every entry.
func TestGetLogsSinceFarFuture(t *testing.T) {
	c := connect(t, "inprocess", "logging", testOptions(t))
	for _, since := range []float64{1e19, 1e300} {
		got := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": since})
		if len(got.Entries) != 0 {
			t.Errorf("getLogs since %g: %d entries, want 0", since, len(got.Entries))
		}
		stats := callOK[gotStats](t, c, "getLogStats", map[string]any{"since": since})
		if stats.Total != 0 {
			t.Errorf("getLogStats since %g: total %d, want 0", since, stats.Total)
		}
	}
}

// TestSSECrossOriginRefused: a web page from another origin must not drive a local demo
// server. Over HTTP+SSE it could: GET /sse answers any Origin with
// Access-Control-Allow-Origin: *, so the page reads the session's endpoint, and POST /message
// takes a text/plain body (a "simple" request, sent without a CORS preflight), so the page
// creates tickets. Requests with a foreign Origin are refused; loopback origins are served.
func TestSSECrossOriginRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := Handler(ctx, "ticketing", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()

	// The page opens an EventSource on /sse (the browser sends its Origin).
	const evil = "https://evil.example"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/sse", nil)
	req.Header.Set("Origin", evil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Access-Control-Allow-Origin") != "" {
		// The browser lets the page read the stream: it learns the message endpoint.
		events := bufio.NewReader(resp.Body)
		endpoint := ""
		for endpoint == "" {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && strings.Contains(rest, "sessionId") {
				endpoint = rest
			}
		}
		post := func(body string) int {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+endpoint, strings.NewReader(body))
			r.Header.Set("Origin", evil)
			r.Header.Set("Content-Type", "text/plain;charset=UTF-8")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`)
		post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"createIssue","arguments":{"title":"from a web page","body":"","priority":"low"}}}`)
		for range 100 {
			line, err := events.ReadString('\n')
			if err != nil {
				break
			}
			if strings.Contains(line, `"id":2`) {
				if strings.Contains(line, "TCK-1") {
					t.Fatalf("a page of %s created a ticket: %s", evil, line)
				}
				break
			}
		}
		t.Fatalf("GET /sse with Origin %s: status %d, Access-Control-Allow-Origin %q; want it refused",
			evil, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /sse with Origin %s: status %d, want 403", evil, resp.StatusCode)
	}

	// Loopback origins (a local inspector) and clients without an Origin are served.
	for _, origin := range []string{"", "http://localhost:6274", "http://127.0.0.1:6274", ts.URL} {
		for _, path := range []string{"/sse", "/mcp"} {
			rctx, rcancel := context.WithCancel(ctx)
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, ts.URL+path, nil)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				rcancel()
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusForbidden {
				t.Errorf("GET %s with Origin %q: 403, want served", path, origin)
			}
			rcancel()
			resp.Body.Close()
		}
	}
}

// TestTicketStoreBounded: createIssue kept every ticket, up to 64 KiB of body each, for the
// life of the server: a peer calling it in a loop grew the process without bound. Once the
// store holds maxTicketBytes, createIssue answers a tool error and stores nothing; the other
// tools go on working.
func TestTicketStoreBounded(t *testing.T) {
	c := connect(t, "inprocess", "ticketing", testOptions(t))
	body := strings.Repeat("x", 65536)
	created, full := 0, false
	for i := 0; i < maxTicketBytes/len(body)+8 && !full; i++ {
		res := callTool(t, c, "createIssue", map[string]any{"title": "t", "body": body, "priority": "low"})
		if res.IsError {
			if !strings.Contains(resultText(res), "full") {
				t.Fatalf("createIssue #%d: %s", i+1, resultText(res))
			}
			full = true
			continue
		}
		created++
	}
	if !full {
		t.Fatalf("%d tickets of %d bytes stored, no refusal", created, len(body))
	}
	if created*len(body) > maxTicketBytes {
		t.Errorf("%d tickets of %d bytes stored, more than %d bytes", created, len(body), maxTicketBytes)
	}
	got := callOK[gotIssues](t, c, "listIssues", map[string]any{"limit": 1})
	if got.Total != created {
		t.Errorf("listIssues total %d, want %d", got.Total, created)
	}
}

// FuzzParseControl parses arbitrary control files: none may panic, and an accepted one reads
// back the same once encoded again.
func FuzzParseControl(f *testing.F) {
	for _, s := range []string{`{"hide":["listIssues"],"add":["assignIssue"]}`, `{}`, `null`, `{"hide":null} {}`,
		`{"hide":["a"]}]`, `{"HIDE":["a"],"hide":["b"]}`, "\xef\xbb\xbf{}", `{"add":[1]}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseControl([]byte(s))
		if err != nil {
			return
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseControl(data)
		if err != nil || !slices.Equal(again.Hide, c.Hide) || !slices.Equal(again.Add, c.Add) {
			t.Fatalf("%s read back as %+v, %v; want %+v", data, again, err, c)
		}
	})
}

// Options.Logs beyond MaxLogs is refused: a huge count allocated every entry up front (out of
// memory, or a makeslice panic).
func TestLogsBounded(t *testing.T) {
	for _, n := range []int{MaxLogs + 1, math.MaxInt} {
		if _, err := Handler(t.Context(), "logging", Options{Logs: n}); err == nil {
			t.Errorf("Logs %d: no error", n)
		}
	}
	if _, err := Handler(t.Context(), "logging", Options{Logs: 10}); err != nil {
		t.Errorf("Logs 10: %v", err)
	}
}
