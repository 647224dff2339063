package registrysync

import (
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestRPCErrorTextLongMessageBounded: a server's JSON-RPC error message of megabytes (escapes
// and cut marks in it, as a hostile server may send) is redacted with memory bounded by the
// bytes passed on, not by the message's: only its start is kept (maxServerErrorBytes), and
// redact decodes the text it searches several ways with an offset (8 bytes) a byte each.
func TestRPCErrorTextLongMessageBounded(t *testing.T) {
	red := newRedactor(ServerConfig{Secrets: []string{"s3cr3tV4lue"}})
	unit := `a%5Cu0041 b\u0042 c%41 d\\/ e… `
	msg := "s3cr3tV4lue " + strings.Repeat(unit, (4<<20)/len(unit)) + "s3cr3tV4lue"
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := rpcErrorText(&mcp.JSONRPCErrorDetails{Code: -32000, Message: msg}, red.String)
	runtime.ReadMemStats(&after)
	if strings.Contains(got, "s3cr3tV4lue") || !strings.HasPrefix(got, "JSON-RPC error -32000: [redacted] a%5Cu0041") {
		t.Errorf("rpcErrorText = %.80q…", got)
	}
	if n := len(got); n > maxServerErrorBytes+64 {
		t.Errorf("rpcErrorText: %d bytes", n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("rpcErrorText of a %d-byte message allocated %d MB", len(msg), alloc>>20)
	}
}
