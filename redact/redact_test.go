package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	v := New("ab", "s3cret", "s3cret-longer", `q"<x>`, "s3cret")
	if got := v.String("s3cret-longer s3cret ab"); got != "[redacted] [redacted] ab" {
		t.Errorf("String = %q (longer values first; short ones kept)", got)
	}
	if got := v.Err(errors.New("auth s3cret failed")); got != "auth [redacted] failed" || v.Err(nil) != "" {
		t.Errorf("Err = %q", got)
	}
	for _, raw := range []string{`"q\"<x>"`, `"q\"\u003cx\u003e"`, `s3cret`} {
		if !v.In([]byte(raw)) {
			t.Errorf("In(%s) = false", raw)
		}
	}
	if v.In([]byte(`{"a":"fine"}`)) {
		t.Error("In of a clean document")
	}
	if (Values{}).String("s3cret") != "s3cret" || !(Values{}).Empty() || !New("x").Empty() {
		t.Error("the zero value and a set of short values redact nothing")
	}
}

func TestJSONAndWalk(t *testing.T) {
	v := New("s3cret")
	clean := []byte(`{"b":1.50,"a":"<ok>"}`)
	if out, changed := v.JSON(clean); changed || string(out) != string(clean) {
		t.Errorf("clean: %s %v", out, changed)
	}
	out, changed := v.JSON([]byte(`{"b":1.50,"s3cret":["x s3cret","<ok>"]}`))
	if !changed || string(out) != `{"[redacted]":["x [redacted]","<ok>"],"b":1.50}` {
		t.Errorf("redacted: %s %v", out, changed)
	}
	if out, changed := v.JSON([]byte(`not json s3cret`)); !changed || string(out) != "not json [redacted]" {
		t.Errorf("text: %s", out)
	}
	doc, err := Decode([]byte(`{"password":"p","nested":{"token":{"x":"s3cret"}},"n":[1,"s3cret"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Encode(v.Walk(doc, func(k string) bool { return strings.Contains(k, "password") || k == "token" }))
	if want := `{"n":[1,"[redacted]"],"nested":{"token":{"x":"[redacted]"}},"password":"[redacted]"}`; string(b) != want {
		t.Errorf("Walk = %s, want %s", b, want)
	}
}

func ExampleValues_JSON() {
	v := New("tok-123")
	out, changed := v.JSON([]byte(`{"content":[{"type":"text","text":"key tok-123"}]}`))
	fmt.Println(string(out), changed)
	// Output: {"content":[{"text":"key [redacted]","type":"text"}]} true
}

// A value spelled with JSON escapes that encoding/json does not write is still found: such text
// is checked decoded; text whose escapes hide nothing is returned unchanged.
func TestJSONEscapedSpellings(t *testing.T) {
	v := New("hunter22", "a/b/c")
	for _, tc := range []struct{ in, want string }{
		{`{"msg":"pw \u0068unter22"}`, `{"msg":"pw [redacted]"}`},
		{`{"msg":"pw hunter\u00322"}`, `{"msg":"pw [redacted]"}`},
		{`{"path":"a\/b\/c"}`, `{"path":"[redacted]"}`},
		{`{"\u0068unter22":1}`, `{"[redacted]":1}`},
	} {
		out, changed := v.JSON([]byte(tc.in))
		if !changed || string(out) != tc.want {
			t.Errorf("%s: got %s %v, want %s", tc.in, out, changed, tc.want)
		}
	}
	for _, in := range []string{`{"msg":"\u0041BC \u4e2d \/ \u003c"}`, `{"n":1.50,"z":"\u0068i"}`} {
		if out, changed := v.JSON([]byte(in)); changed || string(out) != in {
			t.Errorf("%s: got %s %v, want it unchanged", in, out, changed)
		}
	}
	if (Values{}).In([]byte(`"\u0068"`)) {
		t.Error("no values: In reported one")
	}
}

func TestEscapesASCII(t *testing.T) {
	for in, want := range map[string]bool{
		`plain`:              false,
		`\u4e2d\u6587`:       false,
		`\u003c\u003e\u0026`: false,
		`\n\t\"\\`:           false,
		`\u0041`:             true,
		`\u007e`:             true,
		`a\/b`:               true,
		`cut \u00`:           true,
		`\u00zz`:             false,
	} {
		if got := EscapesASCII([]byte(in)); got != want {
			t.Errorf("EscapesASCII(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	v := New(`pa"ss<word>`, "hunter22")
	for in, want := range map[string]string{
		`x hunter22 y`:                         `x ` + Placeholder + ` y`,
		`{"a":"pa\"ss\u003cword\u003e"`:        `{"a":"` + Placeholder + `"`,
		`{"a":"pa\"ss<word>"}`:                 `{"a":"` + Placeholder + `"}`,
		`raw pa"ss<word> and hunter22 cut {"b`: `raw ` + Placeholder + ` and ` + Placeholder + ` cut {"b`,
		`nothing here`:                         `nothing here`,
	} {
		if got := v.Text(in); got != want {
			t.Errorf("Text(%s) = %s, want %s", in, got, want)
		}
	}
	if got := (Values{}).Text("hunter22"); got != "hunter22" {
		t.Errorf("zero Values changed %q", got)
	}
}
