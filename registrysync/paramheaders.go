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
//
// Members are read by their exact names, as the connector validated them and the catalog and
// the executor read them: decoded into mcp-go's types, encoding/json would also take "Name",
// "InputSchema", "Properties" or "Type" for their fields (the last such member winning), so a
// server could bind a header to an argument of a tool whose inputSchema, as everyone else sees
// it, binds none, or give one tool's bindings to another. mcp-go is handed only what the
// bindings are made of, rebuilt from the exact members (headerSchema).
func headerTools(items []json.RawMessage) map[string]*mcp.Tool {
	var tools map[string]*mcp.Tool
	for _, item := range items {
		// Besides the key itself, only a \u escape can spell it.
		if !bytes.Contains(item, []byte("x-mcp-header")) && !bytes.Contains(item, []byte(`\u`)) {
			continue
		}
		name, schema := headerDefinition(item)
		if name == "" || schema == nil {
			continue
		}
		tool := &mcp.Tool{Name: name, RawInputSchema: schema}
		if len(mcp.ExtractParamHeaderBindings(tool)) == 0 || mcp.ValidateParamHeaderAnnotations(tool) != nil {
			continue
		}
		if tools == nil {
			tools = map[string]*mcp.Tool{}
		}
		tools[tool.Name] = tool
	}
	return tools
}

// headerDefinition reads the name of the tool definition item and the part of its inputSchema
// that x-mcp-header bindings are made of (headerSchema), by exact member names (the last of
// a name written twice, as every reader of a definition takes it); "" or nil when the item
// has no string name or no object inputSchema. One decoding of the item: the schema may nest
// thousands of levels deep, and a reading per level would take time of its depth times its
// size.
func headerDefinition(item json.RawMessage) (name string, schema json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.UseNumber() // (a number is passed on as it is written)
	var v any
	if dec.Decode(&v) != nil {
		return "", nil
	}
	d, _ := v.(map[string]any)
	name, _ = d["name"].(string)
	in, ok := d["inputSchema"].(map[string]any)
	if !ok {
		return name, nil
	}
	b, err := json.Marshal(headerSchema(in, 1))
	if err != nil {
		return name, nil
	}
	return name, b
}

// headerSchema is the part of the JSON Schema s that x-mcp-header bindings are made of: its
// "type" and "x-mcp-header", and its "properties", each one's rebuilt so (what is not an object
// is passed on as it is: mcp-go reads no bindings from such a schema). Every member of the
// result is named exactly as mcp-go's fields are, so mcp-go, which matches member names up to
// case, reads what a case-sensitive reader of s reads.
//
// Properties nested deeper than maxHeaderDepth are left out (no binding below): mcp-go reads the
// bindings of this schema again on every tools/call, in time that grows with the square of its
// depth (~0.8 s a call at 5,000 levels), which a hostile server could spend of the connector's
// CPU, shared with its other servers, on every call of its tool.
func headerSchema(s map[string]any, depth int) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"type", "x-mcp-header"} {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
	if v, ok := s["properties"]; ok && depth <= maxHeaderDepth {
		props, isObject := v.(map[string]any)
		if !isObject {
			out["properties"] = v
			return out
		}
		kept := make(map[string]any, len(props))
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				kept[name] = headerSchema(ps, depth+1)
			} else {
				kept[name] = p
			}
		}
		out["properties"] = kept
	}
	return out
}

// maxHeaderDepth is how deep in a tool's arguments an x-mcp-header binding is mirrored: the
// properties of the inputSchema are level 1, theirs level 2, and so on. A header names a
// routing value (a region, a tenant): real bindings sit at the first levels.
const maxHeaderDepth = 16

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
