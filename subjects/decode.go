package subjects

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/mcpstream/mcpstream/jsonscan"
)

// Decode decodes a request payload (CallRequest, Approval, SearchRequest, DetailsRequest,
// ServersRequest and the like) into v, a pointer to a struct, as encoding/json does, and then
// refuses what readers of the same bytes would take differently:
//   - a member named twice (some readers take the first, others the last);
//   - a member whose name matches a field only up to case ("Tool", "TOOL", "tooL" for "tool"):
//     encoding/json takes it for the field, a case-sensitive reader (JavaScript, Python, a
//     policy proxy in front of mcpstream) for an unknown member.
//
// It checks the top level and the members whose fields are structs (principal). Unknown members
// are accepted, so that a newer client's additive fields reach an older service. Values of
// json.RawMessage fields (a call's arguments) are not looked into: they are the tool's.
func Decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	return checkMembers(data, t.Elem(), "")
}

// fieldSet is a struct type's JSON member names, and the struct types of the members whose
// values Decode looks into.
type fieldSet struct {
	names  []string
	nested map[string]reflect.Type
}

var fieldSets sync.Map // reflect.Type → *fieldSet

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{nested: map[string]reflect.Type{}}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "":
			name = f.Name
		}
		fs.names = append(fs.names, name)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshalerType) &&
			!reflect.PointerTo(ft).Implements(textUnmarshalerType) {
			fs.nested[name] = ft
		}
	}
	got, _ := fieldSets.LoadOrStore(t, fs)
	return got.(*fieldSet)
}

// checkMembers checks the members of the object obj (valid JSON) against struct type t; path
// names obj in errors ("" for the top level).
func checkMembers(obj []byte, t reflect.Type, path string) error {
	fs := fieldsOf(t)
	var err error
	seen := make(map[string]bool, len(fs.names))
	jsonscan.Members(obj, func(raw, value []byte) {
		if err != nil {
			return
		}
		name, ok := jsonscan.Name(raw)
		if !ok {
			return
		}
		for _, field := range fs.names {
			if name != field {
				continue
			}
			if seen[name] {
				err = fmt.Errorf("member %q appears twice", truncateName(path+name))
				return
			}
			seen[name] = true
			if nt, ok := fs.nested[name]; ok && len(value) > 0 && value[0] == '{' {
				err = checkMembers(value, nt, path+name+".")
			}
			return
		}
		for _, field := range fs.names {
			if strings.EqualFold(name, field) {
				err = fmt.Errorf("member %q is not a field (member names are case-sensitive): did you mean %q?", truncateName(path+name), path+field)
				return
			}
		}
	})
	return err
}

// truncateName bounds a member name quoted in an error.
func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
