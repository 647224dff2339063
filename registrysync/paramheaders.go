package registrysync

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// On 2026-07-28 a tool's inputSchema may annotate an argument with x-mcp-header (SEP-2243):
// every tools/call over HTTP then mirrors that argument into an Mcp-Param-<Name> header, so that
// gateways can route on it, and a server may refuse a call without it. mcp-go does this from
// the tools it decoded in tools/list; it decodes no list here (see capture.go), so the
// connector keeps the annotated tools of its last tools listing and sets the headers itself,
// with mcp-go's own functions.

// headerTools decodes the tools of a listing that carry valid x-mcp-header annotations (mcp-go
// mirrors nothing for a tool whose annotations are invalid). The other items are not decoded.
func headerTools(items []json.RawMessage) map[string]*mcp.Tool {
	var tools map[string]*mcp.Tool
	for _, item := range items {
		// Besides the key itself, only a \u escape can spell it.
		if !bytes.Contains(item, []byte("x-mcp-header")) && !bytes.Contains(item, []byte(`\u`)) {
			continue
		}
		tool := &mcp.Tool{}
		if json.Unmarshal(item, tool) != nil || len(mcp.ExtractParamHeaderBindings(tool)) == 0 ||
			mcp.ValidateParamHeaderAnnotations(tool) != nil {
			continue
		}
		if tools == nil {
			tools = map[string]*mcp.Tool{}
		}
		tools[tool.Name] = tool
	}
	return tools
}

// setHeaderTools records the annotated tools of the last tools listing.
func (c *connector) setHeaderTools(items []json.RawMessage) {
	tools := headerTools(items)
	c.mu.Lock()
	c.headerTools = tools
	c.mu.Unlock()
}

// paramHeaders returns the Mcp-Param-* headers of a tools/call of tool with args: nil but on a
// 2026-07-28 HTTP session, for a tool with x-mcp-header annotations.
func (s *session) paramHeaders(tool string, args json.RawMessage) http.Header {
	if s.hc == nil || !mcp.IsModernProtocol(s.protocol) {
		return nil
	}
	s.c.mu.Lock()
	def := s.c.headerTools[tool]
	s.c.mu.Unlock()
	if def == nil {
		return nil
	}
	params, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{tool, args})
	if err != nil {
		return nil
	}
	values := mcp.GenerateParamHeaders(def, params)
	if len(values) == 0 {
		return nil
	}
	h := make(http.Header, len(values))
	for k, v := range values {
		h.Set(k, v)
	}
	return h
}
