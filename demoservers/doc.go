// Package demoservers holds the MCP servers bundled with mcpstream for demos
// and end-to-end tests, written with mcp-go, plus a hand-written hostile
// server for testing connectors against misbehaving peers.
//
// It consumes and produces no NATS subjects: it only speaks MCP, over stdio
// (ServeStdio), streamable HTTP at /mcp and legacy HTTP+SSE at /sse
// (Handler, ServeHTTP). Both protocol eras are served on the same
// connection types: 2026-07-28 (server/discover, subscriptions/listen) and
// 2025-11-25 and older (initialize).
//
// # Servers
//
//   - logging — "Application logs: query recent log entries by level and time".
//     getLogs (read-only, idempotent; outputSchema {entries: [{message,
//     stackTrace, level, timestamp}]}) and getLogStats. Entries are generated
//     deterministically from Options.Seed (Options.Logs of them, default 5000,
//     at most MaxLogs), newest first, all within the 59 minutes before the
//     server was built, with
//     12 distinct error messages repeated many times. Optional: tailLogs.
//   - ticketing — "Issue tracker: create and list tickets". createIssue (not
//     read-only, not destructive, not idempotent: every call files a new ticket
//     TCK-1, TCK-2, ...), listIssues (read-only; {issues, total}) and
//     closeIssue (destructive). Tickets live in memory, per server instance, at
//     most 10000 of them and 8 MiB of titles and bodies: past that createIssue
//     answers a tool error ("the issue tracker is full"). Optional: assignIssue.
//   - kb — "Company knowledge base: policies, handbooks and FAQs".
//     search_knowledge_base (term matching over 20 built-in documents,
//     English words and Chinese character bigrams) and get_document.
//     Optional: summarize_document.
//
// Every tool declares all four hint annotations and a title, an input schema
// with property descriptions and an outputSchema; results carry
// structuredContent plus a short text. Arguments are validated against the
// input schema (additionalProperties false) and results against the output
// schema by mcp-go; an integer argument may be written as a float without a
// fraction (2.0, 1e1), as JSON Schema's "integer" allows. tools/list carries
// cache hints for 2026-07-28 clients: logging 60 s public, kb 300 s public,
// ticketing 30 s private.
//
// # Control file
//
// With Options.ControlFile set, NewWatched, ServeStdio and ServeHTTP poll the
// file every Options.ControlInterval (200 ms) until their context ends. Its
// content is {"hide": ["tool", ...], "add": ["tool", ...]}: "add" registers
// optional tools (ExtraTools), "hide" removes any tool and wins over "add".
// When the resulting tools differ from the current ones they are replaced in
// one step (mcp-go's SetTools), so connected clients get exactly one
// notifications/tools/list_changed per change and none for a rewrite that
// changes no tool. A missing file means the default tools (logged when an
// existing file disappears). A malformed one (bad JSON, wrong types, unknown
// field, empty, larger than 1 MiB, unreadable) is reported once on
// Options.ErrorLog and ignored, keeping the current tools: an editor that
// truncates the file before writing it causes no change. A name that is not
// a tool of the server ("hide") or not one of its optional tools ("add") is
// reported and ignored; the rest of the file applies. Writing the file
// atomically (temporary file and rename) avoids even the log lines.
//
// # Transports
//
// ServeStdio reads newline-delimited JSON-RPC from any io.Reader and writes to
// any io.Writer, with its own session per call (mcp-go's StdioServer keeps one
// package-level session, so two of them in one process would cross-talk). On
// a 2026-07-28 stdio connection notifications are opt-in: nothing is sent
// before subscriptions/listen. Handler serves /mcp (streamable HTTP, both
// eras; legacy clients get notifications on a GET stream) and /sse with
// /message (HTTP+SSE); ServeHTTP and ServeHTTPListener run it until their
// context ends, closing open streams. Browser requests from other origins
// (an Origin header that is neither the server's own nor a loopback one) get
// 403, so a web page cannot call a local demo server.
//
// # Hostile server
//
// ServeHostileStdio is a hand-written JSON-RPC peer (no mcp-go) that completes
// a 2025-11-25 initialize, answers ping, and misbehaves on tools/list by mode:
// malformed-json, invalid-schema, huge-description, odd-names, endless-cursor,
// slow (HostileModes).
//
// # State
//
// All state is in memory, per server instance: nothing is persisted.
// Diagnostics go to Options.ErrorLog (stderr by default), never to a stdio
// server's output.
package demoservers
