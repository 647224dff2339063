package demoservers

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"

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
		if err := bindArguments(req, &args); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
		}
		return fn(ctx, args)
	}
}

// bindArguments decodes req's arguments into target as req.BindArguments does, but a number
// written with a fraction or an exponent whose value is an integer (2.0, 1e1) is bound as that
// integer. JSON Schema's "integer", which the arguments were validated against, is any number
// without a fractional part, and clients that keep numbers as floats write them so (Python's
// json.dumps of 2.0; mcpstream's executor passes arguments on as written); encoding/json
// refuses "2.0" for an int field, which answered such valid calls "invalid arguments".
func bindArguments(req mcp.CallToolRequest, target any) error {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	b, err := json.Marshal(integralNumbers(v))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, target)
}

// integralNumbers rewrites, in v (decoded with UseNumber), every number that is an integer
// written otherwise (2.0, 1e1, -0.0) as that integer. Only those within ±2^53, exact in a
// float64: the demo tools' integers are bounded far below by their schemas, and a larger one
// is left as written (refused as before).
func integralNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integralNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integralNumbers(e)
		}
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
	}
	return v
}
