// Package testdeps locates, for tests, the real MCP servers from npm that the test suite talks
// to, and the official MCP conformance suite (@modelcontextprotocol/conformance) with the Node.js
// 22 it needs (the npm package node). They are pinned in testdeps/package.json
// (package-lock.json) and installed by `npm ci --prefix testdeps`, which scripts/test runs. It
// holds no state and is used by tests only.
package testdeps
