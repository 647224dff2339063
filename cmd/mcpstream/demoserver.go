package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/demoservers"
)

func init() {
	register(command{
		name:    "demo-server",
		summary: "serve a bundled demo MCP server (logging, ticketing, kb) on stdio or HTTP",
		run:     runDemoServer,
	})
}

// demoStdin is the input of a stdio demo server (a variable so tests can feed it).
var demoStdin io.Reader = os.Stdin

func demoServerHelp() string {
	var b strings.Builder
	b.WriteString(`
Serves one of the MCP servers bundled for demos and tests. Without --http it speaks MCP on stdin and
stdout (as ` + "`up`" + ` runs it); with --http ADDR it serves streamable HTTP at http://ADDR/mcp and legacy
HTTP+SSE at http://ADDR/sse. Both MCP protocol eras are served (2026-07-28 and 2025-11-25).

Servers and their tools (public names are SERVER__TOOL, e.g. ticketing__createIssue):
  logging     getLogs, getLogStats                    optional: tailLogs
  ticketing   createIssue, listIssues, closeIssue     optional: assignIssue
  kb          search_knowledge_base, get_document     optional: summarize_document

--control FILE changes the tools at run time: the file is polled and holds
  {"hide": ["listIssues"], "add": ["assignIssue"]}
("add" advertises optional tools, "hide" removes any tool and wins over "add"). The file is
polled every --control-interval; each change of the tools sends one
notifications/tools/list_changed (a rewrite that changes no tool sends none). A missing file
means the default tools. A malformed one (not a JSON object, wrong types, unknown fields, empty,
over 1 MiB) is reported on stderr and ignored: the current tools stay, so an editor that
truncates the file before writing it changes nothing. Names that are not tools of the server
are reported on stderr and ignored. Under ` + "`up`" + ` these stderr lines are logged at debug level
(` + "`up --log-level debug`" + `). Writing the file atomically (temporary file, then rename) is best.

Examples:
  mcpstream demo-server ticketing
  mcpstream demo-server kb --http 127.0.0.1:9001
  mcpstream demo-server ticketing --control /tmp/ticketing.control.json`)
	b.WriteString("\n\nServers: " + strings.Join(demoservers.Names(), ", "))
	return b.String()
}

func runDemoServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var httpAddr, control string
	var logs int
	var seed int64
	var interval time.Duration
	fs := newFlagSet("demo-server", "demo-server NAME [flags]", demoServerHelp())
	fs.StringVar(&httpAddr, "http", "", "serve streamable HTTP (/mcp) and SSE (/sse) on this host:port instead of stdio")
	fs.StringVar(&control, "control", "", "control file that hides or adds tools at run time")
	fs.IntVar(&logs, "logs", 0, fmt.Sprintf("log entries the logging server generates (0 = 5000, at most %d)", demoservers.MaxLogs))
	fs.Int64Var(&seed, "seed", 0, "seed of the logging server's generated entries")
	fs.DurationVar(&interval, "control-interval", 0, "how often the control file is polled (0 = 200ms)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		usageError(fs, stderr, "want one server name, one of "+strings.Join(demoservers.Names(), ", "), rest)
		return exitCode(2)
	}
	if logs < 0 || logs > demoservers.MaxLogs {
		// (The logging server generates every entry at start: a huge count runs out of memory.)
		usageError(fs, stderr, fmt.Sprintf("--logs %d: want 0 (the default, 5000) to %d", logs, demoservers.MaxLogs), nil)
		return exitCode(2)
	}
	if interval < 0 {
		usageError(fs, stderr, fmt.Sprintf("--control-interval %s: must not be negative (0 = the default, 200ms)", interval), nil)
		return exitCode(2)
	}
	name := rest[0]
	if !slices.Contains(demoservers.Names(), name) {
		usageError(fs, stderr, fmt.Sprintf("unknown server %q, want one of %s", name, strings.Join(demoservers.Names(), ", ")), nil)
		return exitCode(2)
	}
	opts := demoservers.Options{ControlFile: control, Logs: logs, Seed: seed, ControlInterval: interval, ErrorLog: stderr}
	if httpAddr != "" {
		return demoservers.ServeHTTP(ctx, name, opts, httpAddr)
	}
	return demoservers.ServeStdio(ctx, name, opts, demoStdin, stdout)
}
