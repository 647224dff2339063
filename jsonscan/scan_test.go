package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// referenceMembers reads the members of a JSON object with encoding/json's decoder: names
// decoded, values compacted.
func referenceMembers(obj []byte) ([][2]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out [][2]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		json.Compact(&c, v)
		out = append(out, [2]string{tok.(string), c.String()})
	}
	return out, true
}

func scannedMembers(obj []byte) ([][2]string, bool) {
	var out [][2]string
	bad := false
	ok := Members(obj, func(raw, value []byte) {
		name, ok := Name(raw)
		bad = bad || !ok
		var c bytes.Buffer
		json.Compact(&c, value)
		out = append(out, [2]string{name, c.String()})
	})
	return out, ok && !bad
}

// Members finds the members encoding/json's decoder finds, in the same order, for every
// JSON object.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a" : "x\"}" , "b":[1,{"c":"]"}],"c":null,"d":true,"e":-1.5e3}`,
		`{"structuredContent":{"x":[1,2]},"StructuredContent":1,"\u0073tructuredContent":"s"}`,
		"{\n\t\"a\"\r\n:\n{}\n}", `{"a":{"b":{"c":{}}},"z":"\\"}`, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) || !bytes.HasPrefix(bytes.TrimLeft(obj, " \t\r\n"), []byte("{")) {
			return
		}
		want, wok := referenceMembers(obj)
		got, gok := scannedMembers(obj)
		if wok != gok || !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\ndecoder %v %q\nscanner %v %q", obj, wok, want, gok, got)
		}
	})
}

// Elements finds the elements encoding/json finds, in the same order, for every JSON array.
func FuzzElements(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `[1]`, `[1,"a,]",{"b":[2]},null,true,-1.5e3]`, "[\n[],\t{}\r]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, arr []byte) {
		var want []json.RawMessage
		if !json.Valid(arr) || json.Unmarshal(arr, &want) != nil {
			return
		}
		var got []string
		ok := Elements(arr, func(v []byte) {
			var c bytes.Buffer
			json.Compact(&c, v)
			got = append(got, c.String())
		})
		if !ok || len(got) != len(want) {
			t.Fatalf("%q: %v %q, want %d elements", arr, ok, got, len(want))
		}
		for i, w := range want {
			var c bytes.Buffer
			json.Compact(&c, w)
			if c.String() != got[i] {
				t.Fatalf("%q: element %d %q, want %q", arr, i, got[i], c.String())
			}
		}
	})
}
