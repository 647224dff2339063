package demoservers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// failSafe bounds waits that would otherwise hang a broken test. It is a
// guard, never a timing assertion.
const failSafe = 10 * time.Second

// transports lists the ways tests connect to a demo server.
var transports = []string{"inprocess", "stdio", "stdio-legacy", "http", "http-legacy", "sse"}

// syncBuffer is a goroutine-safe bytes.Buffer for Options.ErrorLog.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testOptions returns small, quiet options for tests.
func testOptions(t *testing.T) Options {
	t.Helper()
	return Options{Logs: 2000, Seed: 7, ControlInterval: 20 * time.Millisecond, ErrorLog: io.Discard}
}

// connect starts the named server with opts and returns an initialized client
// over the given transport. Everything is torn down at cleanup.
func connect(t *testing.T, kind, name string, opts Options) *client.Client {
	t.Helper()
	c, _ := connectInit(t, kind, name, opts)
	return c
}

// connectInit is connect, also returning the initialize (or discover) result.
func connectInit(t *testing.T, kind, name string, opts Options) (*client.Client, *mcp.InitializeResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	var c *client.Client
	var clientOpts []client.ClientOption
	switch kind {
	case "inprocess":
		srv, err := NewWatched(ctx, name, opts)
		if err != nil {
			t.Fatalf("NewWatched(%q): %v", name, err)
		}
		c, err = client.NewInProcessClient(srv)
		if err != nil {
			t.Fatalf("NewInProcessClient: %v", err)
		}
	case "stdio", "stdio-legacy":
		if kind == "stdio-legacy" {
			clientOpts = append(clientOpts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
		}
		c = client.NewClient(stdioTransport(t, ctx, func(ctx context.Context, in io.Reader, out io.Writer) error {
			return ServeStdio(ctx, name, opts, in, out)
		}), clientOpts...)
	case "http":
		h, err := Handler(ctx, name, opts)
		if err != nil {
			t.Fatalf("Handler(%q): %v", name, err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		c, err = client.NewStreamableHttpClient(ts.URL + "/mcp")
		if err != nil {
			t.Fatalf("NewStreamableHttpClient: %v", err)
		}
	case "http-legacy":
		h, err := Handler(ctx, name, opts)
		if err != nil {
			t.Fatalf("Handler(%q): %v", name, err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		// Continuous listening (a GET stream for notifications) pins the
		// client to 2025-11-25.
		c, err = client.NewStreamableHttpClient(ts.URL+"/mcp", transport.WithContinuousListening())
		if err != nil {
			t.Fatalf("NewStreamableHttpClient: %v", err)
		}
	case "sse":
		h, err := Handler(ctx, name, opts)
		if err != nil {
			t.Fatalf("Handler(%q): %v", name, err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		tr, err := transport.NewSSE(ts.URL + "/sse")
		if err != nil {
			t.Fatalf("NewSSE: %v", err)
		}
		// HTTP+SSE is a legacy transport: test it with a legacy client
		// (mcp-go's client would negotiate 2026-07-28 over it too).
		c = client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	default:
		t.Fatalf("unknown transport %q", kind)
	}
	// Cleanups run last-in first-out: close the client before cancelling
	// the server context and closing the HTTP test server.
	t.Cleanup(func() { c.Close() })
	return c, start(t, c)
}

// start starts and initializes c.
func start(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	// The transport keeps Start's context for its streams (SSE, stdio
	// reader): it must live as long as the client.
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("client start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "demoservers-test", Version: "0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

// stdioTransport runs serve on a pair of pipes and returns a client transport
// on the other ends. At cleanup the pipes are closed and serve must return.
func stdioTransport(t *testing.T, ctx context.Context, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *transport.Stdio {
	t.Helper()
	clientToServerR, clientToServerW := io.Pipe()
	serverToClientR, serverToClientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, clientToServerR, serverToClientW)
		serverToClientW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		// The server sees EOF and closes its output, ending the client's
		// reader. (Closing serverToClientR here instead races with that
		// reader and makes mcp-go log a spurious read error.)
		clientToServerW.Close()
		// The client may already have stopped reading: drain the server's output so a response
		// or notification it writes at the end cannot block it on the pipe.
		go io.Copy(io.Discard, serverToClientR)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server returned %v, want nil", err)
			}
		case <-time.After(failSafe):
			t.Errorf("server did not return after its input closed")
		}
	})
	return transport.NewIO(serverToClientR, clientToServerW, io.NopCloser(strings.NewReader("")))
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s(%v): %v", name, args, err)
	}
	return res
}

// callErr calls a tool that should not exist and returns the protocol error.
func callErr(t *testing.T, c *client.Client, name string, args map[string]any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	_, err := c.CallTool(ctx, req)
	return err
}

// callOK calls a tool, requires success and decodes its structuredContent.
func callOK[T any](t *testing.T, c *client.Client, name string, args map[string]any) T {
	t.Helper()
	res := callTool(t, c, name, args)
	if res.IsError {
		t.Fatalf("call %s(%v): isError, content %v", name, args, resultText(res))
	}
	if len(res.Content) == 0 || resultText(res) == "" {
		t.Errorf("call %s: no text content", name)
	}
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structuredContent: %v", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode structuredContent %s: %v", b, err)
	}
	return out
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func listTools(t *testing.T, c *client.Client) []mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

func toolNamesOf(tools []mcp.Tool) []string {
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	slices.Sort(names)
	return names
}

// writeFileAtomic writes data to path through a rename, as the control file
// documentation asks.
func writeFileAtomic(t *testing.T, path string, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
