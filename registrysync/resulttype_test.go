package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// resultTypeByDecoding is what dispatch did before resultTypeInputRequired: raw decoded whole
// only to read its resultType.
func resultTypeByDecoding(raw []byte) (inputRequired, ok bool) {
	var head struct {
		ResultType string `json:"resultType"`
	}
	// (null decodes into a struct without an error)
	if err := json.Unmarshal(raw, &head); err != nil || isNull(raw) {
		return false, false
	}
	return head.ResultType == "input_required", true
}

// resultTypeCases are results (valid JSON) on which resultTypeInputRequired must agree with
// encoding/json.
func resultTypeCases() []string {
	cases := []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"resultType":"input_required"}`,
		`{"resultType":"complete","content":[]}`,
		` { "content" : [ ] , "resultType" : "input_required" } `,
		`{"RESULTTYPE":"input_required"}`,
		`{"resulttype":"input_required"}`,
		`{"result\u0054ype":"input_required"}`,
		`{"resultType":"input\u005frequired"}`,
		`{"resultType":"input_required","resultType":null}`,
		`{"resultType":"input_required","resultType":"complete"}`,
		`{"resultType":null,"resultType":"input_required"}`,
		`{"resultType":null}`,
		`{"resultType":1}`,
		`{"resultType":true}`,
		`{"resultType":{"a":"input_required"}}`,
		`{"resultType":["input_required"]}`,
		`{"resultType":"input_required","resultType":1}`,
		`{"resultType2":"input_required"}`,
		`{"resultTyp":"input_required"}`,
		`{"meta":{"resultType":"input_required"}}`,
		`{"a":"\"resultType\":\"input_required\""}`,
		`{"resultType":"input_required\u0000"}`,
		"{\"resultType\":\"\xff\"}",
		"{\"result\xffType\":\"input_required\"}",
		`{}`,
		`[]`,
		`[{"resultType":"input_required"}]`,
		`null`,
		` null `,
		`"input_required"`,
		`12`,
		`true`,
	}
	// Every letter encoding/json folds like one of resultType's (ſ for s, say), in its place.
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		folded := unicode.ToUpper(unicode.ToLower(r))
		if folded >= utf8.RuneSelf || !strings.ContainsRune("RESULTTYPE", folded) {
			continue
		}
		for i, c := range "resultType" {
			if unicode.ToUpper(c) == folded {
				cases = append(cases, `{"`+"resultType"[:i]+string(r)+"resultType"[i+1:]+`":"input_required"}`)
			}
		}
	}
	return cases
}

// TestResultTypeScan: resultTypeInputRequired reads a result's resultType (input_required or
// not, or a result that is no object) exactly as decoding it with encoding/json did, on member
// names in any case or with escapes, duplicates, nulls and values of other types.
func TestResultTypeScan(t *testing.T) {
	for _, raw := range resultTypeCases() {
		if !json.Valid([]byte(raw)) {
			t.Fatalf("test case %q is not JSON", raw)
		}
		wantIR, wantOK := resultTypeByDecoding([]byte(raw))
		gotIR, gotOK := resultTypeInputRequired([]byte(raw))
		if gotIR != wantIR || gotOK != wantOK {
			t.Errorf("%q: input_required %v ok %v, encoding/json says %v %v", raw, gotIR, gotOK, wantIR, wantOK)
		}
	}
}

// TestDispatchResultType: through a stdio server answering tools/call with the result given, a
// result saying resultType input_required (in any case, as encoding/json reads it), or one
// that is no object, or whose resultType is neither a string nor null, is a protocol_error;
// any other result is passed on.
func TestDispatchResultType(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rawServer(t, "rt", "echoresult")))
	rec := record(t, h.env, subjects.RegistryServer("rt"))
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return hasName(t, s, "t") }))
	for _, tc := range []struct{ result, wantErr string }{
		{`{"content":[{"type":"text","text":"ok"}]}`, ""},
		{`{"content":[],"resultType":"complete"}`, ""},
		{`{"content":[],"resultType":null}`, ""},
		{`{"resultType":"input_required","content":[]}`, "input_required"},
		{`{"content":[],"RESULTTYPE":"input_required"}`, "input_required"},
		{`{"content":[],"result\u0054ype":"input\u005frequired"}`, "input_required"},
		{`{"resultType":"input_required","resultType":null}`, "input_required"},
		{`{"resultType":"input_required","resultType":"complete"}`, ""},
		{`{"content":[],"resultType":7}`, "not a JSON object"},
		{`[{"resultType":"input_required"}]`, "not a JSON object"},
		{`"input_required"`, "not a JSON object"},
	} {
		args, _ := json.Marshal(map[string]json.RawMessage{"r": json.RawMessage(tc.result)})
		r := h.m.Dispatch(context.Background(), "rt", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: args, TimeoutMs: 20000})
		switch {
		case tc.wantErr == "" && r.Error != nil:
			t.Errorf("%s: %+v, want the result", tc.result, r.Error)
		case tc.wantErr == "" && string(r.Result) != tc.result:
			t.Errorf("%s: result %s", tc.result, r.Result)
		case tc.wantErr != "" && (r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, tc.wantErr)):
			t.Errorf("%s: %+v %s, want %s %q", tc.result, r.Error, r.Result, subjects.CodeProtocolError, tc.wantErr)
		}
	}
}

func FuzzResultTypeScan(f *testing.F) {
	for _, raw := range resultTypeCases() {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // results are answers' members: always JSON
		}
		wantIR, wantOK := resultTypeByDecoding(raw)
		gotIR, gotOK := resultTypeInputRequired(raw)
		if gotIR != wantIR || gotOK != wantOK {
			t.Fatalf("%q: input_required %v ok %v, encoding/json says %v %v", raw, gotIR, gotOK, wantIR, wantOK)
		}
	})
}

// BenchmarkResultType: dispatch reading a tools/call result's resultType, by decoding the result
// whole (before) and by scanning its top-level members (now), on results of three sizes.
func BenchmarkResultType(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		var sb strings.Builder
		sb.WriteString(`{"content":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"type":"text","text":"row %d: %s"}`, i, strings.Repeat("lorem ipsum dolor sit amet, ", 30))
		}
		sb.WriteString(`],"structuredContent":{"rows":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":%d,"name":"row %d","score":%d.5,"tags":["a","b","c"]}`, i, i, i)
		}
		sb.WriteString(`]},"isError":false}`)
		raw := []byte(sb.String())
		for _, impl := range []struct {
			name string
			fn   func([]byte) (bool, bool)
		}{{"decode", resultTypeByDecoding}, {"scan", resultTypeInputRequired}} {
			b.Run(fmt.Sprintf("%s/%dB", impl.name, len(raw)), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if ir, ok := impl.fn(raw); ir || !ok {
						b.Fatal(ir, ok)
					}
				}
			})
		}
	}
}
