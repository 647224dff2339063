package demoservers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrUnknownMode is returned (wrapped) for a hostile mode not in HostileModes().
var ErrUnknownMode = errors.New("unknown hostile mode")

// HostileProtocolVersion is the protocol version the hostile server speaks.
const HostileProtocolVersion = "2025-11-25"

// HugeDescriptionSize is the length in bytes of the huge tool description: twice the largest
// definition a registry snapshot may hold (subjects.MaxDefinitionBytes, 512 KiB), so that any
// connector's bound rejects the tool, and under the page a connector reads (a NATS server's
// max_payload, plus room for the answer's envelope). It was 5 MiB, which proved nothing more and took seconds to write, read and
// parse under the race detector: on a loaded machine a list then ran past its timeout.
const HugeDescriptionSize = 1 << 20

// Hostile modes: what tools/list answers.
const (
	// HostileMalformedJSON answers tools/list with a line that is not valid JSON.
	HostileMalformedJSON = "malformed-json"
	// HostileInvalidSchema lists tools whose inputSchema is not a valid
	// object schema ("type": 42, a string, properties as an array), plus echo.
	HostileInvalidSchema = "invalid-schema"
	// HostileHugeDescription lists a tool with a 1 MiB description, plus echo.
	HostileHugeDescription = "huge-description"
	// HostileOddNames lists tools named "a.b/c d", "ünïcode.tool", "x*>y" and
	// a 200-character name.
	HostileOddNames = "odd-names"
	// HostileEndlessCursor answers every tools/list page with one tool and a
	// new nextCursor, forever.
	HostileEndlessCursor = "endless-cursor"
	// HostileSlow never answers tools/list.
	HostileSlow = "slow"
)

var hostileModes = []string{
	HostileEndlessCursor, HostileHugeDescription, HostileInvalidSchema,
	HostileMalformedJSON, HostileOddNames, HostileSlow,
}

// HostileModes returns the modes of ServeHostileStdio, sorted.
func HostileModes() []string { return slices.Clone(hostileModes) }

// OddToolNames are the tool names listed in mode "odd-names".
var OddToolNames = []string{"a.b/c d", "ünïcode.tool", "x*>y", strings.Repeat("long_name_", 20)}

// ServeHostileStdio speaks just enough JSON-RPC by hand (no mcp-go) to look
// like a 2025-11-25 MCP server over stdio, and misbehaves on tools/list as
// mode says. It answers initialize, ping, tools/list, and tools/call for the
// well-behaved "echo" tool some modes list; other requests (server/discover
// included, so clients fall back to initialize at once) get -32601, unparsable
// lines -32700, and notifications and responses are ignored. It returns nil
// when in reaches EOF or ctx is done.
func ServeHostileStdio(ctx context.Context, mode string, in io.Reader, out io.Writer) error {
	if !slices.Contains(hostileModes, mode) {
		return fmt.Errorf("hostile mode %q: %w", mode, ErrUnknownMode)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lines, readErr := readLines(ctx, in)

	h := hostile{mode: mode, out: out}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("read stdio: %w", err)
			}
			return nil
		case line := <-lines:
			if err := h.handle(line); err != nil {
				return fmt.Errorf("write stdio: %w", err)
			}
		}
	}
}

type hostile struct {
	mode string
	out  io.Writer
}

type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (h *hostile) handle(line []byte) error {
	if len(strings.TrimSpace(string(line))) == 0 {
		return nil
	}
	var m rpcMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return h.send(json.RawMessage("null"), nil, &rpcError{Code: -32700, Message: "Parse error"})
	}
	if m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil // a response or a notification
	}
	switch m.Method {
	case "initialize":
		return h.send(m.ID, map[string]any{
			"protocolVersion": HostileProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": "hostile-" + h.mode, "version": Version},
		}, nil)
	case "ping":
		return h.send(m.ID, map[string]any{}, nil)
	case "tools/list":
		return h.toolsList(m)
	case "tools/call":
		return h.toolsCall(m)
	}
	return h.send(m.ID, nil, &rpcError{Code: -32601, Message: "Method not found: " + m.Method})
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (h *hostile) send(id json.RawMessage, result any, rerr *rpcError) error {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		msg["error"] = rerr
	} else {
		msg["result"] = result
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return h.write(b)
}

func (h *hostile) write(b []byte) error {
	_, err := h.out.Write(append(b, '\n'))
	return err
}

var echoTool = map[string]any{
	"name":        "echo",
	"description": "Echo the given text back.",
	"inputSchema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"text": map[string]any{"type": "string", "description": "Text to echo."}},
		"required":   []string{"text"},
	},
	"annotations": map[string]any{"readOnlyHint": true, "idempotentHint": true},
}

var emptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

var hugeDescription = sync.OnceValue(func() string {
	const unit = "This tool description is deliberately enormous to test size limits. "
	s := strings.Repeat(unit, HugeDescriptionSize/len(unit)+1)
	return s[:HugeDescriptionSize]
})

func (h *hostile) toolsList(m rpcMessage) error {
	var tools []any
	result := map[string]any{}
	switch h.mode {
	case HostileSlow:
		return nil // never answers
	case HostileMalformedJSON:
		return h.write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[{"name":"truncated","description":"this response is cut o`))
	case HostileInvalidSchema:
		tools = []any{
			map[string]any{"name": "type_is_number", "description": "inputSchema.type is the number 42.", "inputSchema": map[string]any{"type": 42}},
			map[string]any{"name": "schema_is_string", "description": "inputSchema is a string, not an object.", "inputSchema": "not an object"},
			map[string]any{"name": "properties_is_array", "description": "inputSchema.properties is an array.", "inputSchema": map[string]any{"type": "object", "properties": []int{1, 2}}},
			echoTool,
		}
	case HostileHugeDescription:
		tools = []any{
			map[string]any{"name": "huge_description", "description": hugeDescription(), "inputSchema": emptySchema},
			echoTool,
		}
	case HostileOddNames:
		for _, name := range OddToolNames {
			tools = append(tools, map[string]any{"name": name, "description": "A tool with an unusual name.", "inputSchema": emptySchema})
		}
	case HostileEndlessCursor:
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(m.Params, &p)
		page, _ := strconv.Atoi(strings.TrimPrefix(p.Cursor, "page-"))
		tools = []any{map[string]any{"name": fmt.Sprintf("page%d_tool", page), "description": "One tool per page.", "inputSchema": emptySchema}}
		result["nextCursor"] = fmt.Sprintf("page-%d", page+1)
	}
	result["tools"] = tools
	return h.send(m.ID, result, nil)
}

func (h *hostile) toolsCall(m rpcMessage) error {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name != "echo" ||
		!(h.mode == HostileInvalidSchema || h.mode == HostileHugeDescription) {
		return h.send(m.ID, nil, &rpcError{Code: -32602, Message: "Unknown tool: " + p.Name})
	}
	return h.send(m.ID, map[string]any{
		"content": []any{map[string]any{"type": "text", "text": p.Arguments.Text}},
	}, nil)
}
