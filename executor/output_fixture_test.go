package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// reportSchema is the outputSchema of the fixture's report tool. Its pattern has a lookahead,
// which Go's regexp refuses: it runs on the ECMAScript engine (regexp2).
const reportSchema = `{
  "type": "object",
  "properties": {
    "runs": {"type": "integer", "minimum": 1},
    "ref": {"type": "string", "pattern": "^(?!X)R-[0-9]+$"},
    "items": {"type": "array", "items": {"type": "string"}},
    "tree": {}
  },
  "required": ["runs", "ref"]
}`

// reportSecret is a value the report tool's mode "secret" puts in its result.
const reportSecret = "90210777"

// reportShapePad is the size of the text item of the report tool's mode "shape": past the
// audit event's cap.
const reportShapePad = 20 << 10

// stringContent is a content item that a server writes as a JSON string (mcp-go writes what
// the item's MarshalJSON says): a result of the wrong shape.
type stringContent struct{ mcp.TextContent }

func (c stringContent) MarshalJSON() ([]byte, error) { return json.Marshal(c.Text) }

// reportDepth is how deeply the report tool's mode "deep" nests its tree: past maxResultDepth.
const reportDepth = maxResultDepth + 20

// addReportTools adds the tools whose results test the check against their outputSchema. They
// file a report (not read-only, not idempotent: claimed before dispatch, never run twice), count
// their runs, wait for the file named by their argument wait to exist (if given), and answer
// as their argument mode says (the server does not check its own output: the executor sees
// what the tool returns):
//
//	ok        structuredContent that matches reportSchema
//	wrong     runs is a string
//	pattern   ref misses the lookahead pattern
//	missing   no structuredContent (text only)
//	null      structuredContent null
//	error     isError: true, with structuredContent that does not match
//	deep      tree nests reportDepth levels (the rest matches)
//	big       about 2.7 MiB of items, all strings
//	bigwrong  the same, with the last item a number
//	secret    ref R-<reportSecret> (matches, but not once the connector redacts reportSecret)
//	shape     content whose last item is a string, not an object (refused by the connector for
//	          its shape), after a text item of reportShapePad bytes that starts with reportSecret
//
// report's outputSchema is reportSchema; report_any's true, report_none's false, and
// report_broken's does not compile.
func addReportTools(srv *server.MCPServer) {
	var runs atomic.Int64
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := runs.Add(1)
		if path := req.GetString("wait", ""); path != "" {
			// Held until the test creates the file (bounded, and ended with the call).
			for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(path); err == nil {
					break
				}
			}
		}
		ok := map[string]any{"runs": n, "ref": fmt.Sprintf("R-%d", n)}
		items := func(last any) []any {
			out := make([]any, 200_000)
			for i := range out {
				out[i] = fmt.Sprintf("item-%06d", i)
			}
			out[len(out)-1] = last
			return out
		}
		var sc any
		switch mode := req.GetString("mode", "ok"); mode {
		case "ok":
			sc = ok
		case "wrong":
			ok["runs"] = fmt.Sprint(n)
			sc = ok
		case "pattern":
			ok["ref"] = fmt.Sprintf("X-%d", n)
			sc = ok
		case "missing":
			return mcp.NewToolResultText(fmt.Sprintf("filed report %d", n)), nil
		case "null":
			sc = json.RawMessage(`null`)
		case "error":
			res := mcp.NewToolResultError(fmt.Sprintf("report %d failed", n))
			res.StructuredContent = map[string]any{"oops": true}
			return res, nil
		case "deep":
			ok["tree"] = json.RawMessage(strings.Repeat("[", reportDepth) + strings.Repeat("]", reportDepth))
			sc = ok
		case "big":
			ok["items"] = items("last")
			sc = ok
		case "bigwrong":
			ok["items"] = items(42)
			sc = ok
		case "secret":
			ok["ref"] = "R-" + reportSecret
			sc = ok
		case "shape":
			res := mcp.NewToolResultText(reportSecret + " " + strings.Repeat("p", reportShapePad))
			res.Content = append(res.Content, stringContent{mcp.NewTextContent("not an object")})
			res.StructuredContent = ok
			return res, nil
		default:
			return mcp.NewToolResultError("unknown mode " + mode), nil
		}
		return mcp.NewToolResultStructured(sc, fmt.Sprintf("filed report %d", n)), nil
	}
	for name, schema := range map[string]string{
		"report":        reportSchema,
		"report_any":    `true`,
		"report_none":   `false`,
		"report_broken": `{"type": "object", "properties": {"runs": {"type": 17}}}`,
	} {
		srv.AddTool(mcp.NewTool(name, mcp.WithDescription("Files a report; returns it as its mode says."),
			mcp.WithString("mode"), mcp.WithString("wait"), mcp.WithRawOutputSchema(json.RawMessage(schema)), hints(false, false, false)), handler)
	}
}
