package demoservers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// rawConn is a hand-driven JSON-RPC connection to a stdio server.
type rawConn struct {
	t     *testing.T
	w     io.Writer
	lines chan []byte
}

func dialHostile(t *testing.T, mode string) *rawConn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ServeHostileStdio(context.Background(), mode, inR, outW)
		outW.Close()
		done <- err
	}()
	lines := make(chan []byte, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHostileStdio returned %v, want nil", err)
			}
		case <-time.After(failSafe):
			t.Errorf("ServeHostileStdio did not return at EOF")
		}
	})
	return &rawConn{t: t, w: inW, lines: lines}
}

func (c *rawConn) send(msg string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, msg+"\n"); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// recv returns the next line the server wrote.
func (c *rawConn) recv() []byte {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("server closed its output")
		}
		return line
	case <-time.After(failSafe):
		c.t.Fatal("no message from server")
	}
	return nil
}

type rawResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func (c *rawConn) call(id int, method, params string) rawResponse {
	c.t.Helper()
	if params == "" {
		params = "{}"
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	var r rawResponse
	if line := c.recv(); json.Unmarshal(line, &r) != nil {
		c.t.Fatalf("%s: invalid JSON response %.200s", method, line)
	}
	if string(r.ID) != fmt.Sprint(id) {
		c.t.Fatalf("%s: response id %s, want %d", method, r.ID, id)
	}
	return r
}

// handshake performs the 2025-11-25 initialize exchange.
func (c *rawConn) handshake() {
	c.t.Helper()
	if r := c.call(1, "server/discover", ""); r.Error == nil || r.Error.Code != -32601 {
		c.t.Fatalf("server/discover: want -32601, got %+v %s", r.Error, r.Result)
	}
	r := c.call(2, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || res.ProtocolVersion != HostileProtocolVersion {
		c.t.Fatalf("initialize result %s: %v", r.Result, err)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

type rawTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type rawToolsList struct {
	Tools      []rawTool `json:"tools"`
	NextCursor string    `json:"nextCursor"`
}

func (c *rawConn) toolsList(id int, params string) rawToolsList {
	c.t.Helper()
	r := c.call(id, "tools/list", params)
	var res rawToolsList
	if err := json.Unmarshal(r.Result, &res); err != nil {
		c.t.Fatalf("tools/list result %.200s: %v", r.Result, err)
	}
	return res
}

// The huge description is over every definition bound a connector may have, so that its tool is
// rejected wherever it is listed, and under the bound on a page (a registry event), so that the
// list still reaches the connector and its other tool is kept: it need be no larger, for a
// larger one only slowed the tests that list it under the race detector.
func TestHugeDescriptionOverEveryDefinitionBound(t *testing.T) {
	if HugeDescriptionSize <= subjects.MaxDefinitionBytes {
		t.Errorf("HugeDescriptionSize %d, not over subjects.MaxDefinitionBytes %d", HugeDescriptionSize, subjects.MaxDefinitionBytes)
	}
	if HugeDescriptionSize >= subjects.MaxEventBytes {
		t.Errorf("HugeDescriptionSize %d, not under subjects.MaxEventBytes %d", HugeDescriptionSize, subjects.MaxEventBytes)
	}
}

func TestHostileModes(t *testing.T) {
	want := []string{"endless-cursor", "huge-description", "invalid-schema", "malformed-json", "odd-names", "slow"}
	if got := HostileModes(); !slices.Equal(got, want) {
		t.Errorf("HostileModes() = %v, want %v", got, want)
	}
	err := ServeHostileStdio(context.Background(), "polite", strings.NewReader(""), io.Discard)
	if !errors.Is(err, ErrUnknownMode) {
		t.Errorf("unknown mode: err = %v, want ErrUnknownMode", err)
	}
}

func TestHostile(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		check func(t *testing.T, c *rawConn)
	}{
		{HostileMalformedJSON, func(t *testing.T, c *rawConn) {
			c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
			if line := c.recv(); json.Valid(line) {
				t.Errorf("tools/list answer is valid JSON: %s", line)
			}
		}},
		{HostileInvalidSchema, func(t *testing.T, c *rawConn) {
			res := c.toolsList(3, "")
			schemas := map[string]string{}
			for _, tool := range res.Tools {
				schemas[tool.Name] = string(tool.InputSchema)
			}
			for name, want := range map[string]string{
				"type_is_number":      `{"type":42}`,
				"schema_is_string":    `"not an object"`,
				"properties_is_array": `{"properties":[1,2],"type":"object"}`,
			} {
				if schemas[name] != want {
					t.Errorf("%s inputSchema = %s, want %s", name, schemas[name], want)
				}
			}
			if _, ok := schemas["echo"]; !ok {
				t.Errorf("no well-behaved echo tool in %v", res.Tools)
			}
		}},
		{HostileHugeDescription, func(t *testing.T, c *rawConn) {
			res := c.toolsList(3, "")
			if len(res.Tools) != 2 || len(res.Tools[0].Description) != HugeDescriptionSize || res.Tools[1].Name != "echo" {
				t.Errorf("tools: %d, first description %d bytes; want huge_description of %d bytes and echo",
					len(res.Tools), len(res.Tools[0].Description), HugeDescriptionSize)
			}
		}},
		{HostileOddNames, func(t *testing.T, c *rawConn) {
			res := c.toolsList(3, "")
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, OddToolNames) {
				t.Errorf("names = %q, want %q", names, OddToolNames)
			}
			if n := len(OddToolNames[3]); n != 200 {
				t.Errorf("long name has %d characters, want 200", n)
			}
		}},
		{HostileEndlessCursor, func(t *testing.T, c *rawConn) {
			seen := map[string]bool{}
			params := ""
			for i := range 50 {
				res := c.toolsList(10+i, params)
				if res.NextCursor == "" || seen[res.NextCursor] || len(res.Tools) != 1 {
					t.Fatalf("page %d: nextCursor %q (seen before: %v), %d tools", i, res.NextCursor, seen[res.NextCursor], len(res.Tools))
				}
				seen[res.NextCursor] = true
				params = fmt.Sprintf(`{"cursor":%q}`, res.NextCursor)
			}
		}},
		{HostileSlow, func(t *testing.T, c *rawConn) {
			c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
			// The next answer is the ping's: tools/list stays unanswered.
			if r := c.call(4, "ping", ""); string(r.Result) != "{}" {
				t.Errorf("ping result %s", r.Result)
			}
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			c := dialHostile(t, tc.mode)
			c.handshake()
			if r := c.call(90, "ping", ""); string(r.Result) != "{}" {
				t.Errorf("ping result %s", r.Result)
			}
			c.send(`this is not json`)
			var perr rawResponse
			if err := json.Unmarshal(c.recv(), &perr); err != nil || perr.Error == nil || perr.Error.Code != -32700 {
				t.Errorf("garbage line: want a -32700 error, got %+v (%v)", perr, err)
			}
			if r := c.call(91, "resources/list", ""); r.Error == nil || r.Error.Code != -32601 {
				t.Errorf("resources/list: want -32601, got %+v", r)
			}
			tc.check(t, c)
		})
	}
}

// TestHostileWithMCPClient checks what mcp-go's client makes of the hostile
// server: it falls back from server/discover to initialize at once, and
// reads or rejects the hostile lists.
func TestHostileWithMCPClient(t *testing.T) {
	connectHostile := func(t *testing.T, mode string) *client.Client {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		c := client.NewClient(stdioTransport(t, ctx, func(ctx context.Context, in io.Reader, out io.Writer) error {
			return ServeHostileStdio(ctx, mode, in, out)
		}))
		t.Cleanup(func() { c.Close() })
		if res := start(t, c); res.ProtocolVersion != HostileProtocolVersion {
			t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, HostileProtocolVersion)
		}
		return c
	}
	page := func(t *testing.T, c *client.Client, cursor mcp.Cursor) (*mcp.ListToolsResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), failSafe)
		defer cancel()
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = cursor
		return c.ListToolsByPage(ctx, req)
	}

	t.Run("odd-names", func(t *testing.T) {
		res, err := page(t, connectHostile(t, HostileOddNames), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := toolNamesOf(res.Tools); !slices.Equal(got, slices.Sorted(slices.Values(OddToolNames))) {
			t.Errorf("tools = %q", got)
		}
	})
	t.Run("huge-description", func(t *testing.T) {
		c := connectHostile(t, HostileHugeDescription)
		res, err := page(t, c, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != 2 || len(res.Tools[0].Description) != HugeDescriptionSize {
			t.Errorf("got %d tools", len(res.Tools))
		}
		if got := callOK[map[string]any](t, c, "echo", map[string]any{"text": "hi"}); got != nil {
			t.Errorf("echo structuredContent = %v, want none", got)
		}
	})
	t.Run("endless-cursor", func(t *testing.T) {
		c := connectHostile(t, HostileEndlessCursor)
		var cursor mcp.Cursor
		for range 20 { // the caller's own page cap is the only guard
			res, err := page(t, c, cursor)
			if err != nil {
				t.Fatal(err)
			}
			if res.NextCursor == "" {
				t.Fatal("the endless list ended")
			}
			cursor = res.NextCursor
		}
	})
	// A server that never answers, and one whose answer cannot be parsed,
	// look the same to mcp-go's client: the request runs into its context.
	for _, mode := range []string{HostileSlow, HostileMalformedJSON} {
		t.Run(mode, func(t *testing.T) {
			c := connectHostile(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if _, err := c.ListToolsByPage(ctx, mcp.ListToolsRequest{}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("tools/list: err = %v, want DeadlineExceeded", err)
			}
			if err := c.Ping(context.Background()); err != nil {
				t.Errorf("ping after the unanswered tools/list: %v", err)
			}
		})
	}
	// mcp-go's client cannot decode a tools/list result holding a schema
	// that is not an object: the whole page fails, good tools included.
	t.Run("invalid-schema", func(t *testing.T) {
		c := connectHostile(t, HostileInvalidSchema)
		if res, err := page(t, c, ""); err == nil {
			t.Errorf("tools/list decoded %d tools, want a decode error", len(res.Tools))
		} else {
			t.Logf("mcp-go client: %v", err)
		}
	})
}
