package main

import (
	"strings"
	"testing"
)

// TestServerURLPortOutOfRange: url.Parse takes any digits as a port, so a server's url with a
// port out of range (a typo, a digit too many) was accepted at load, and its connector then
// failed to dial it ("invalid port") with every retry, without end. search.embeddings.url
// refuses the same at load: so is a server's, naming the field.
func TestServerURLPortOutOfRange(t *testing.T) {
	for _, u := range []string{"http://mcp.example:99999/mcp", "https://mcp.example:0/mcp", "http://[::1]:65536/sse"} {
		text := "servers:\n  - name: a\n    transport: http\n    url: " + u + "\n"
		_, err := parseConfig("c.yaml", []byte(text), lookupTest)
		if err == nil || !strings.Contains(err.Error(), "c.yaml:4: servers[0] (a): field url: ") || !strings.Contains(err.Error(), "port") {
			t.Errorf("url %s: %v; want refused, naming field url and the port", u, err)
		}
	}
	for _, u := range []string{"http://mcp.example:8080/mcp", "https://mcp.example/mcp", "http://[::1]:65535/sse", "http://mcp.example:/mcp"} {
		text := "servers:\n  - name: a\n    transport: http\n    url: " + u + "\n"
		if _, err := parseConfig("c.yaml", []byte(text), lookupTest); err != nil {
			t.Errorf("url %s: %v", u, err)
		}
	}
}
