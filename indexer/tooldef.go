package indexer

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/search"
)

// maxLineBytes bounds the one-line description of summary answers.
const maxLineBytes = 240

// toolDef is what the catalog reads from a raw tool definition. It is read leniently: a field of
// the wrong type is ignored, never fatal, since definitions come from servers we do not control.
type toolDef struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
	Hints        Hints
}

// Hints are a tool's MCP annotations that the catalog labels. Only explicit values count: a hint
// that is absent is false here (the MCP defaults are pessimistic guesses, not statements).
type Hints struct {
	ReadOnly    bool
	Destructive bool // destructiveHint: true and not readOnlyHint
	Idempotent  bool
	OpenWorld   bool
}

// ParseHints reads the annotations of a raw tool definition. The executor should derive
// policy.Tool.Destructive the same way so search labels and enforcement agree.
func ParseHints(def json.RawMessage) Hints { return parseDef(def).Hints }

func parseDef(raw json.RawMessage) toolDef {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return toolDef{}
	}
	d := toolDef{
		Name:         jsonString(m["name"]),
		Title:        jsonString(m["title"]),
		Description:  jsonString(m["description"]),
		InputSchema:  objectOrNil(m["inputSchema"]),
		OutputSchema: schemaOrNil(m["outputSchema"]),
		Annotations:  objectOrNil(m["annotations"]),
	}
	if d.Annotations != nil {
		var a map[string]json.RawMessage
		if json.Unmarshal(d.Annotations, &a) == nil {
			d.Hints.ReadOnly = jsonTrue(a["readOnlyHint"])
			d.Hints.Destructive = jsonTrue(a["destructiveHint"]) && !d.Hints.ReadOnly
			d.Hints.Idempotent = jsonTrue(a["idempotentHint"])
			d.Hints.OpenWorld = jsonTrue(a["openWorldHint"])
			if d.Title == "" {
				d.Title = jsonString(a["title"])
			}
		}
	}
	return d
}

// tags are the static labels of a definition, in a stable order.
func (h Hints) tags() []string {
	var t []string
	if h.ReadOnly {
		t = append(t, LabelReadOnly)
	}
	if h.Destructive {
		t = append(t, LabelDestructive)
	}
	if h.Idempotent {
		t = append(t, LabelIdempotent)
	}
	if h.OpenWorld {
		t = append(t, LabelOpenWorld)
	}
	return t
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func jsonTrue(raw json.RawMessage) bool { return string(raw) == "true" }

// objectOrNil keeps raw as is (byte-faithful) when it is a JSON object.
func objectOrNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	return raw
}

// schemaOrNil returns raw if it is a JSON Schema the connector accepts as an outputSchema: an
// object, or a boolean schema (true, false), which 2026-07-28 allows; else nil.
func schemaOrNil(raw json.RawMessage) json.RawMessage {
	if s := string(bytes.TrimSpace(raw)); s == "true" || s == "false" {
		return raw
	}
	return objectOrNil(raw)
}

// searchDoc is the search document of a tool.
func searchDoc(public, server, serverDesc string, d toolDef) search.Doc {
	return search.Doc{
		ID:                public,
		Server:            server,
		ServerDescription: serverDesc,
		Name:              d.Name,
		Title:             d.Title,
		Description:       d.Description,
		Params:            search.ParamsFromSchema(d.InputSchema),
		Tags:              d.Hints.tags(),
	}
}

// oneLine returns the first line (or paragraph) of a description, with control characters
// replaced and cut to maxLineBytes on a rune boundary.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	if len(s) <= maxLineBytes {
		return s
	}
	cut := maxLineBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], " ") + "…"
}
