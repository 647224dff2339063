// Package testdeps locates, for tests, the real MCP servers from npm that the test suite talks
// to. They are pinned in testdeps/package.json (package-lock.json) and installed by
// `npm ci --prefix testdeps`, which scripts/test runs. It holds no state and is used by tests
// only.
package testdeps
