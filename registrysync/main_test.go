package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/demoservers"
)

// childEnv makes the test binary an MCP server over stdio (the child of a stdio connector):
//
//	fixture           the fixture server below (exit and pid tools included)
//	hostile:<mode>    demoservers.ServeHostileStdio
//	raw:<mode>        serveRawChild (hostile_raw_test.go)
//	mutate:<seed>     serveMutateChild (mutate_test.go): the ticketing demo server behind a mutating proxy
//	rogue:<mode>      serveRogueChild (rogue_test.go)
//	script            serveScriptChild (hostile_answers_test.go)
//	demo:<name>       demoservers.ServeStdio, control file in MCPSTREAM_TEST_CONTROL
//
// With startDelayEnv set, any of them first sleeps that long (slow_start_test.go).
const childEnv = "MCPSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(serveChild(mode))
	}
	if pidFile := os.Getenv(parentEnv); pidFile != "" {
		os.Exit(serveParent(pidFile))
	}
	os.Exit(m.Run())
}

func serveChild(mode string) int {
	slowStart()
	// The hand-written servers keep SIGTERM's default action (it ends the process), as a stopped
	// server's process does: caught for a context none of them reads, it left a hung one
	// (raw:stuck, rogue:closestdout) running until the SIGKILL childTermGrace (3 s) later, and
	// every stop of one waited for it.
	switch {
	case mode == "script":
		return serveScriptChild()
	case strings.HasPrefix(mode, "raw:"):
		return serveRawChild(strings.TrimPrefix(mode, "raw:"))
	case strings.HasPrefix(mode, "mutate:"):
		return serveMutateChild(strings.TrimPrefix(mode, "mutate:"))
	case strings.HasPrefix(mode, "rogue:"):
		return serveRogueChild(strings.TrimPrefix(mode, "rogue:"))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	var err error
	switch {
	case mode == "fixture":
		pageSize, _ := strconv.Atoi(os.Getenv("MCPSTREAM_TEST_PAGE"))
		srv := newFixture(fixtureOptions{pageSize: pageSize, child: true})
		err = server.NewStdioServer(srv).Listen(ctx, os.Stdin, os.Stdout)
	case strings.HasPrefix(mode, "hostile:"):
		err = demoservers.ServeHostileStdio(ctx, strings.TrimPrefix(mode, "hostile:"), os.Stdin, os.Stdout)
	case strings.HasPrefix(mode, "demo:"):
		err = demoservers.ServeStdio(ctx, strings.TrimPrefix(mode, "demo:"),
			demoservers.Options{ControlFile: os.Getenv("MCPSTREAM_TEST_CONTROL"), ControlInterval: 20 * time.Millisecond},
			os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown %s=%q", childEnv, mode)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	return 0
}

// oneOfSchema has root-level oneOf and $defs, which mcp-go's decoded mcp.Tool drops.
const oneOfSchema = `{"type":"object","oneOf":[{"required":["id"]},{"required":["name"]}],` +
	`"properties":{"id":{"type":"integer"},"name":{"type":"string"}},"$defs":{"x":{"type":"string"}}}`

type fixtureOptions struct {
	pageSize int            // 0: no pagination
	ttlMs    int64          // cache hints on 2026-07-28
	scope    mcp.CacheScope // "" → public
	child    bool           // the exit tool may end the process
}

// fixtureTools are the tool names the fixture lists (exit and getenv only in a child).
var fixtureTools = []string{"drop", "echo", "fail", "pid", "raw_oneof", "slow"}

// newFixture is an mcp-go server with tools for every test: echo (structured result), fail
// (isError), slow (sleeps), pid, drop (deletes a tool, so list_changed), raw_oneof (a raw
// schema), and exit in a child process.
func newFixture(o fixtureOptions) *server.MCPServer {
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithPromptCapabilities(true),
		server.WithRecovery(),
	}
	if o.pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(o.pageSize))
	}
	if o.ttlMs > 0 {
		scope := o.scope
		if scope == "" {
			scope = mcp.CacheScopePublic
		}
		opts = append(opts, server.WithCacheHints(o.ttlMs, scope))
	}
	srv := server.NewMCPServer("fixture", "1.2.3", opts...)
	srv.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo text, structured."),
		mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := req.GetString("text", "")
			return mcp.NewToolResultStructured(map[string]any{"echo": text, "len": len(text)}, text), nil
		})
	srv.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails as a tool error.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed on purpose"), nil
		})
	srv.AddTool(mcp.NewTool("slow", mcp.WithDescription("Sleeps ms milliseconds."), mcp.WithNumber("ms")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			d := time.Duration(req.GetFloat("ms", 0)) * time.Millisecond
			select {
			case <-time.After(d):
				return mcp.NewToolResultText("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	srv.AddTool(mcp.NewTool("pid", mcp.WithDescription("The server's process id.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	srv.AddTool(mcp.NewTool("drop", mcp.WithDescription("Deletes a tool."), mcp.WithString("name", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.DeleteTools(req.GetString("name", ""))
			return mcp.NewToolResultText("dropped"), nil
		})
	srv.AddTool(mcp.NewToolWithRawSchema("raw_oneof", "Takes an id or a name.", json.RawMessage(oneOfSchema)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	if o.child {
		srv.AddTool(mcp.NewTool("getenv", mcp.WithDescription("An environment variable of the server."), mcp.WithString("name", mcp.Required())),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("=" + os.Getenv(req.GetString("name", ""))), nil
			})
		srv.AddTool(mcp.NewTool("exit", mcp.WithDescription("Ends the server process.")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3)
				return nil, nil
			})
	}
	srv.AddPrompt(mcp.NewPrompt("greet", mcp.WithPromptDescription("Say hello."),
		mcp.WithArgument("who")),
		func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("hello", nil), nil
		})
	return srv
}
