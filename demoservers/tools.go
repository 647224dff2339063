package demoservers

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// hints are a tool's behaviour annotations. All four are always sent
// explicitly: mcp.NewTool defaults to readOnly=false, destructive=true,
// idempotent=false, openWorld=true, which is wrong for most demo tools.
type hints struct {
	readOnly, destructive, idempotent, openWorld bool
}

var (
	readOnly = hints{readOnly: true, idempotent: true}
)

func annotate(title string, h hints) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(h.readOnly),
		DestructiveHint: mcp.ToBoolPtr(h.destructive),
		IdempotentHint:  mcp.ToBoolPtr(h.idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(h.openWorld),
	})
}

// outputSchema returns a tool option declaring a hand-written output schema.
// It panics on invalid JSON: the schemas are constants of this package.
func outputSchema(schema string) mcp.ToolOption {
	if !json.Valid([]byte(schema)) {
		panic("demoservers: invalid output schema: " + schema)
	}
	return mcp.WithRawOutputSchema(json.RawMessage(schema))
}

// typed binds a tool call's arguments to A before calling fn. Arguments have
// already been validated against the input schema by mcp-go.
func typed[A any](fn func(ctx context.Context, args A) (*mcp.CallToolResult, error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args A
		if err := req.BindArguments(&args); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
		}
		return fn(ctx, args)
	}
}
