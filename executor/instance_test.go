package executor

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// instanceSeeds are texts decodeInstance must read as jsonschema.UnmarshalJSON does: valid JSON
// of every kind (escapes, invalid UTF-8, a name twice, numbers at the edges of the grammar) and
// text that is not JSON (which it hands to jsonschema.UnmarshalJSON for its error).
var instanceSeeds = []string{
	`{}`, `[]`, `{"id":"POL-TRAVEL"}`, ` {"a" : [1, -2.5e+3, 0, true, false, null, "x", {}, []] } `,
	`{"a":1,"a":2}`, `{"a":{"b":{"c":[[[]]]}}}`, `"s"`, `0`, `-0`, `1E9`, `1e-9`, `12.50`, `true`, `null`,
	`{"t":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800 \udc00x"}`, "{\"u\":\"\xff\xfe\"}", "{\"\xc3\":1}",
	`{"k\u0041":"v"}`, `{"ü":"日本"}`, "{\"s\":\"\u2028\"}",
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a":1 "b":2}`, `{a:1}`, `01`, `-`, `1.`,
	`.5`, `1e`, `1e+`, `+1`, `0x1`, `tru`, `truex`, `nul`, `{"a":1}x`, `{"a":1}{}`, `"unterminated`, "\"ctl\x01\"",
	`"bad \x escape"`, `"\u12"`, `[1 2]`, `NaN`, `Infinity`, "\ufeff{}", `{"a":[}`, `{"a":tru}`,
	strings.Repeat("[", 600) + strings.Repeat("]", 600), strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100),
}

func checkDecodeInstance(t *testing.T, text string) {
	got, gerr := decodeInstance([]byte(text))
	want, werr := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("decodeInstance(%q): error %v, jsonschema.UnmarshalJSON: %v", text, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeInstance(%q) = %#v, jsonschema.UnmarshalJSON: %#v", text, got, want)
	}
}

func TestDecodeInstanceMatches(t *testing.T) {
	for _, s := range instanceSeeds {
		checkDecodeInstance(t, s)
	}
}

func FuzzDecodeInstance(f *testing.F) {
	for _, s := range instanceSeeds {
		f.Add(s)
	}
	f.Fuzz(checkDecodeInstance)
}
