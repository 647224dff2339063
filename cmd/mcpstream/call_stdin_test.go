package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallStdinOverTheLimitIsTooLarge: `call NAME -` read at most MaxCallBytes+1 bytes of
// stdin and parsed what it got, so a valid JSON object larger than a call request may be was
// cut short and refused as "ARGS_JSON must be a JSON object" — a wrong diagnosis of a correct
// input. It is too_large, as the same arguments a little smaller are (the client refuses the
// request before sending it).
func TestCallStdinOverTheLimitIsTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "args.json")
	args := `{"query":"` + strings.Repeat("x", subjects.MaxCallBytes) + `"}`
	if err := os.WriteFile(path, []byte(args), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Nothing listens there: the arguments are refused before any connection.
	out, errOut, err := runCmd(t, ctx, "call", "kb__search_knowledge_base", "-", "--json", "--nats", "nats://127.0.0.1:1")
	var code exitCode
	if !errors.As(err, &code) || code != 1 || !strings.Contains(out, `"code": "too_large"`) {
		t.Errorf("got %v, stdout %q, stderr %q; want too_large and exit 1", err, lastLines(out, 5), lastLines(errOut, 2))
	}
}
