package testdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// NPMServer returns the entry point (dist/index.js) of the installed npm MCP server
// @modelcontextprotocol/<pkg>, to run with node. When it or node is missing it fails the test
// in CI and under scripts/test (CI or MCPSTREAM_TEST_STRICT set: they install it, so its absence
// is a failure) and skips it elsewhere, saying how to install it.
func NPMServer(t testing.TB, pkg string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	entry := filepath.Join(filepath.Dir(self), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	var err error
	if !ok {
		err = os.ErrNotExist
	} else if _, err = os.Stat(entry); err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		msg := "real MCP server " + pkg + " unavailable (" + err.Error() + "); run `npm ci --prefix testdeps` (Node.js 20+)"
		if os.Getenv("CI") != "" || os.Getenv("MCPSTREAM_TEST_STRICT") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return entry
}
