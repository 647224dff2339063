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
		missing(t, "real MCP server "+pkg+" unavailable ("+err.Error()+"); run `npm ci --prefix testdeps` (Node.js 20+)")
	}
	return entry
}

// Conformance returns the node binary (22, pinned: the npm package node) and the entry point of
// the official MCP conformance suite (@modelcontextprotocol/conformance, which needs Node.js 22),
// to run as `node CLI client --command ... --scenario ...`. When either is missing it fails the
// test or skips it as NPMServer does.
func Conformance(t testing.TB) (node, cli string) {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	modules := filepath.Join(filepath.Dir(self), "node_modules")
	node = filepath.Join(modules, ".bin", "node")
	cli = filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
	var err error
	if !ok {
		err = os.ErrNotExist
	} else if _, err = os.Stat(cli); err == nil {
		_, err = exec.LookPath(node)
	}
	if err != nil {
		missing(t, "MCP conformance suite unavailable ("+err.Error()+"); run `npm ci --prefix testdeps`")
	}
	return node, cli
}

// missing fails the test in CI and under scripts/test (CI or MCPSTREAM_TEST_STRICT set: they
// install testdeps, so an absence is a failure) and skips it elsewhere.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" || os.Getenv("MCPSTREAM_TEST_STRICT") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
