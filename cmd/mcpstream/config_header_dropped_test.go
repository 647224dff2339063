package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServerHeadersTheClientDrops: Go's HTTP client never sends a request's Host,
// Content-Length, Transfer-Encoding or Trailer header from its header map (it writes its own),
// so `headers: {Host: mcp.internal}` (virtual-host routing behind a proxy, say) was accepted and
// dropped without a word: every request went with the url's host. They are refused at load,
// naming the header (whatever its case).
func TestServerHeadersTheClientDrops(t *testing.T) {
	// What makes them pointless: the server never sees the configured value.
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Host }))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Host", "mcp.internal")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got == "mcp.internal" {
		t.Fatalf("net/http sent the configured Host header: the check below is not needed")
	}

	for _, h := range []string{"Host", "host", "Content-Length", "transfer-encoding", "Trailer"} {
		text := "servers:\n  - name: a\n    url: https://10.0.0.5/mcp\n    headers:\n      " + h + ": x\n"
		_, err := parseConfig("c.yaml", []byte(text), lookupTest)
		if err == nil || !strings.Contains(err.Error(), "c.yaml:5: servers[0] (a): field headers."+h+": ") {
			t.Errorf("header %s: %v; want refused, naming field headers.%s and its line", h, err, h)
		}
	}
	text := "servers:\n  - name: a\n    url: https://10.0.0.5/mcp\n    headers:\n      X-Forwarded-Host: mcp.internal\n      User-Agent: ops\n"
	if _, err := parseConfig("c.yaml", []byte(text), lookupTest); err != nil {
		t.Errorf("headers sent as configured: %v", err)
	}
}
