package subjects

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
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
//
// An integer field (v, k, timeoutMs, limit...) takes any JSON number whose value is an integer
// in its range, however written: 1.0, 1e0, 5.00, 50e-1 (JSON does not tell them from 1 and 5,
// and Python's json.dumps writes a float so). A number that is not an integer (1.5), or is out
// of the field's range, is refused naming the member.
func Decode(data []byte, v any) error {
	data, err := unmarshal(data, v)
	if err != nil {
		return err
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	return checkMembers(data, t.Elem(), "")
}

// unmarshal is json.Unmarshal(data, v), but for a number in an integer field of the struct v
// points to (or of a struct field of it) that encoding/json refuses for its spelling (1.0, 1e0)
// while its value is an integer: it decodes that integer. It returns the text it decoded: data,
// or a copy of it with such numbers written as integers (data itself is never changed). A
// number that is not an integer or does not fit its field is an error naming the member.
//
// The common request, whose integers are written as integers, is decoded once, as before: the
// numbers are looked at only when encoding/json refused one.
func unmarshal(data []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return data, json.Unmarshal(data, v)
	}
	// json.Unmarshal fills what it can before it reports a type error: the second decoding
	// starts from v as it was. (Copied only when v is not zero, as it is when a request is
	// decoded: the call path's decoding costs no more than json.Unmarshal's.)
	var before reflect.Value
	if !rv.Elem().IsZero() {
		before = reflect.New(rv.Elem().Type()).Elem()
		before.Set(rv.Elem())
	}
	err := json.Unmarshal(data, v)
	if err == nil || !numberRefused(err) {
		return data, err
	}
	fixed, ferr := integralNumbers(data, rv.Elem().Type())
	switch {
	case ferr != nil:
		return data, ferr
	case fixed == nil: // the number refused is none of the integer fields'
		return data, err
	}
	if before.IsValid() {
		rv.Elem().Set(before)
	} else {
		rv.Elem().SetZero()
	}
	return fixed, json.Unmarshal(fixed, v)
}

// numberRefused reports whether err is encoding/json's refusal of a number for its field's type.
func numberRefused(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te) && strings.HasPrefix(te.Value, "number")
}

// fieldSet is a struct type's JSON member names, the struct types of the members whose values
// Decode looks into, and the integer types of its integer members.
type fieldSet struct {
	names  []string
	nested map[string]reflect.Type
	ints   map[string]reflect.Type
}

var fieldSets sync.Map // reflect.Type → *fieldSet

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{nested: map[string]reflect.Type{}, ints: map[string]reflect.Type{}}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
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
		if isInteger(ft) && !slices.Contains(strings.Split(opts, ","), "string") {
			fs.ints[name] = ft
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

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// integralNumbers rewrites the numbers of the integer members of the JSON object data (valid
// JSON), decoded into struct type t, that encoding/json refuses for their spelling, as
// integers; it looks into the members whose fields are structs, as checkMembers does. A member
// is matched to a field as encoding/json matches it (exactly, else up to case), so that the
// checks of Decode that follow see every member. It returns nil when nothing was rewritten,
// and an error naming the first integer member whose number is not an integer or is out of its
// field's range.
func integralNumbers(data []byte, t reflect.Type) ([]byte, error) {
	type edit struct {
		at, end int
		text    string
	}
	var edits []edit
	var walk func(obj []byte, t reflect.Type, path string) error
	walk = func(obj []byte, t reflect.Type, path string) error {
		fs := fieldsOf(t)
		var err error
		jsonscan.Members(obj, func(raw, value []byte) {
			if err != nil || len(value) == 0 {
				return
			}
			name, ok := jsonscan.Name(raw)
			if !ok {
				return
			}
			field := ""
			for _, f := range fs.names {
				if name == f {
					field = f
					break
				}
				if field == "" && strings.EqualFold(name, f) {
					field = f
				}
			}
			if nt, ok := fs.nested[field]; ok && value[0] == '{' {
				err = walk(value, nt, path+name+".")
				return
			}
			it, ok := fs.ints[field]
			if !ok || value[0] != '-' && (value[0] < '0' || value[0] > '9') {
				return
			}
			text, why := integerText(string(value), it)
			switch {
			case why != "":
				err = fmt.Errorf("member %q is %s, %s", truncateName(path+name), truncateName(string(value)), why)
			case text != string(value):
				// value is a subslice of data: its offset is what their capacities differ by.
				at := cap(data) - cap(value)
				edits = append(edits, edit{at, at + len(value), text})
			}
		})
		return err
	}
	if err := walk(data, t, ""); err != nil || len(edits) == 0 {
		return nil, err
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, e := range edits { // (in document order)
		out = append(out, data[last:e.at]...)
		out = append(out, e.text...)
		last = e.end
	}
	return append(out, data[last:]...), nil
}

// integerText reads the JSON number s as a value of the integer type t: its decimal text
// (without a fraction or an exponent), or why it is none ("not an integer", "out of range...").
// Exactly, from its digits: float64 would take 1.0000000000000000001 for 1.
func integerText(s string, t reflect.Type) (text, why string) {
	neg := strings.HasPrefix(s, "-")
	mant := strings.TrimPrefix(s, "-")
	var exp int64
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		e := mant[i+1:]
		mant = mant[:i]
		eneg := strings.HasPrefix(e, "-")
		e = strings.TrimLeft(strings.TrimLeft(e, "+-"), "0")
		if len(e) > 9 { // beyond what a message's digits can make up for
			e = "999999999"
		}
		exp, _ = strconv.ParseInt("0"+e, 10, 64)
		if eneg {
			exp = -exp
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	lo, hi := integerRange(t)
	outOfRange := "out of range: an integer from " + lo + " to " + hi
	switch {
	case digits == "":
		return "0", ""
	case exp < 0:
		return "", "not an integer"
	case int64(len(digits))+exp > 20: // past every 64-bit integer
		return "", outOfRange
	}
	text = digits + strings.Repeat("0", int(exp))
	if neg {
		text = "-" + text
	}
	var err error
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(text, 10, t.Bits())
	default:
		_, err = strconv.ParseInt(text, 10, t.Bits())
	}
	if err != nil {
		return "", outOfRange
	}
	return text, ""
}

// integerRange is the smallest and the largest value of the integer type t, as text.
func integerRange(t reflect.Type) (lo, hi string) {
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "0", strconv.FormatUint(^uint64(0)>>(64-t.Bits()), 10)
	}
	return strconv.FormatInt(-1<<(t.Bits()-1), 10), strconv.FormatInt(1<<(t.Bits()-1)-1, 10)
}
