package search

import (
	"encoding/json"
	"sort"
	"strings"
)

// Param is one input parameter as the index sees it.
type Param struct{ Name, Description string }

// Bounds on what ParamsFromSchema extracts from one schema.
const (
	maxParams         = 64
	maxParamDescBytes = 2 << 10
	maxEnumValues     = 32
)

// ParamsFromSchema extracts the parameters of a tool's inputSchema: the
// top-level properties and, one level down, the properties of object-typed
// and array-of-object properties (named "parent.child"). A property's
// description gets its title and string enum/const values appended, also
// from anyOf/oneOf branches, since they are words a query may use. It is
// tolerant of junk: invalid JSON, a schema that is not an object, properties of
// the wrong type all yield what could be read, possibly nothing; it never
// panics. Parameters come sorted by name for determinism.
func ParamsFromSchema(inputSchema json.RawMessage) []Param {
	var root map[string]json.RawMessage
	if json.Unmarshal(inputSchema, &root) != nil {
		return nil
	}
	var out []Param
	collectParams(root, "", 1, &out)
	return out
}

func collectParams(schema map[string]json.RawMessage, prefix string, depth int, out *[]Param) {
	var props map[string]json.RawMessage
	if json.Unmarshal(schema["properties"], &props) != nil {
		return
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(*out) >= maxParams {
			return
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(props[n], &p) != nil {
			*out = append(*out, Param{Name: prefix + n})
			continue
		}
		*out = append(*out, Param{Name: prefix + n, Description: describe(p)})
		if depth > 0 {
			collectParams(p, prefix+n+".", depth-1, out)
			var items map[string]json.RawMessage
			if json.Unmarshal(p["items"], &items) == nil {
				collectParams(items, prefix+n+".", depth-1, out)
			}
		}
	}
}

// describe joins the human text of one property schema.
func describe(p map[string]json.RawMessage) string {
	var b strings.Builder
	add := func(s string) {
		if s == "" || b.Len()+len(s) > maxParamDescBytes {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	add(str(p["title"]))
	add(str(p["description"]))
	enums := 0
	addEnum := func(m map[string]json.RawMessage) {
		var vals []json.RawMessage
		if json.Unmarshal(m["enum"], &vals) == nil {
			for _, v := range vals {
				if enums >= maxEnumValues {
					return
				}
				if s := str(v); s != "" {
					add(s)
					enums++
				}
			}
		}
		if s := str(m["const"]); s != "" && enums < maxEnumValues {
			add(s)
			enums++
		}
	}
	addEnum(p)
	for _, key := range []string{"anyOf", "oneOf"} {
		var branches []map[string]json.RawMessage
		if json.Unmarshal(p[key], &branches) != nil {
			continue
		}
		for _, br := range branches {
			add(str(br["description"]))
			addEnum(br)
		}
	}
	return b.String()
}
