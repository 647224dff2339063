package executor

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// The front end recognizes an answer by resultPrefix without decoding it: encodeResult must keep
// starting with it.
func TestResultPrefix(t *testing.T) {
	for _, id := range []string{"c-1", `odd "id" <&>`, "ü"} {
		res := subjects.CallResult{V: subjects.Version, ID: id, Tenant: "local", Tool: "kb__get_document",
			Status: subjects.CallOK, Result: json.RawMessage(`{"content":[]}`)}
		data, err := encodeResult(res)
		if err != nil {
			t.Fatal(err)
		}
		if p := resultPrefix(id); !bytes.HasPrefix(data, p) {
			t.Errorf("encodeResult(%q) = %s; want the prefix %s", id, data, p)
		}
		if bytes.HasPrefix(data, resultPrefix(id+"x")) {
			t.Errorf("the answer of %q matches the prefix of another id", id)
		}
	}
}

// encodeAudit must encode like json.Marshal (the arguments and result spliced in as they are).
func TestEncodeAudit(t *testing.T) {
	for _, ev := range []subjects.AuditEvent{
		{V: 1, Type: "audit.request", CallID: "c-1", Tenant: "local", Arguments: json.RawMessage(`{"id":"POL-TRAVEL"}`), ArgBytes: 19},
		{V: 1, Type: "audit.result", CallID: "c-1", Tenant: "local", Result: json.RawMessage(`{"content":[{"type":"text","text":"a <b>"}]}`)},
		{V: 1, Type: "audit.decision", CallID: "c-1", Tenant: "local", Decision: "allowed"},
	} {
		got, err := encodeAudit(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back subjects.AuditEvent
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("encodeAudit: %v: %s", err, got)
		}
		want, _ := json.Marshal(ev)
		again, _ := json.Marshal(back)
		if !bytes.Equal(again, want) {
			t.Errorf("encodeAudit round trip = %s, want %s", again, want)
		}
	}
}

func TestIsToolError(t *testing.T) {
	for in, want := range map[string]bool{
		`{"content":[],"isError":true}`:      true,
		`{"content":[],"isError":false}`:     false,
		`{"content":[]}`:                     false,
		`{"content":[],"\u0069sError":true}`: true,
		`{"content":[{"text":"\u0041"}]}`:    false,
		`{"content":[],"isError":"yes"}`:     false,
		``:                                   false,
	} {
		if got := isToolError([]byte(in)); got != want {
			t.Errorf("isToolError(%s) = %v, want %v", in, got, want)
		}
	}
}

// encodeResult and encodeAudit write by hand what json.Marshal writes (marshalResult,
// marshalAudit): the same bytes for any value, strings that need escaping (control characters,
// HTML characters, invalid UTF-8, U+2028) and times in any zone included, and json.Marshal's
// error for a time it refuses.
func TestEncodersMatchMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	pieces := []string{"", "a", "call-1", "ü", "日本", `"`, `\`, "<", ">", "&", "\n", "\r", "\t", "\b", "\f",
		"\x00", "\x01", "\x1f", "\x7f", "\xff", "\xc3", "\xe2\x80", "\u2028", "\u2029", "\ufffd", "😀", "/", " ", "'"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600+30*60), time.FixedZone("x", -7*3600), time.Local}
	tm := func() time.Time {
		switch rng.IntN(6) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // json.Marshal refuses it
		case 2:
			return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
	}
	num := func() int64 {
		return []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt64}[rng.IntN(6)]
	}
	raw := func() json.RawMessage {
		return []json.RawMessage{nil, {}, json.RawMessage(`{"content":[]}`), json.RawMessage(`{"a":"<b>"}`)}[rng.IntN(4)]
	}
	for i := range 5000 {
		res := subjects.CallResult{V: int(num()), ID: str(), Tenant: str(), Tool: str(), Status: str(), Result: raw(),
			Attempts: int(num()), Duplicate: rng.IntN(2) == 0, StartedAt: tm(), FinishedAt: tm()}
		if rng.IntN(2) == 0 {
			res.Error = &subjects.Error{Code: str(), Message: str(), Path: str(), RetryAfterMs: num(), Reason: str()}
		}
		got, gerr := encodeResult(res)
		want, werr := marshalResult(res)
		if (gerr != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("#%d encodeResult(%#v) =\n%s (%v), json.Marshal:\n%s (%v)", i, res, got, gerr, want, werr)
		}

		ev := subjects.AuditEvent{V: int(num()), Type: str(), CallID: str(), Tenant: str(), User: str(), Tool: str(),
			Server: str(), Decision: str(), Code: str(), Message: str(), Arguments: raw(), Result: raw(),
			Truncated: rng.IntN(2) == 0, ArgBytes: int(num()), ResBytes: int(num()), IsError: rng.IntN(2) == 0, At: tm()}
		switch rng.IntN(3) {
		case 0:
			ev.Roles = []string{}
		case 1:
			ev.Roles = []string{str(), str()}
		}
		got, gerr = encodeAudit(ev)
		want, werr = marshalAudit(ev)
		if (gerr != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("#%d encodeAudit(%#v) =\n%s (%v), json.Marshal:\n%s (%v)", i, ev, got, gerr, want, werr)
		}
	}
}

// The hand-written encoders know every member of the types they encode: a field added to one
// of them fails here until encode.go writes it too.
func TestEncodedFields(t *testing.T) {
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[subjects.CallResult](): "v id tenant tool status result,omitempty error,omitempty attempts,omitempty duplicate,omitempty startedAt,omitzero finishedAt,omitzero",
		reflect.TypeFor[subjects.Error]():      "code message path,omitempty retryAfterMs,omitempty reason,omitempty",
		reflect.TypeFor[subjects.AuditEvent](): "v type callId tenant user,omitempty roles,omitempty tool,omitempty server,omitempty decision,omitempty code,omitempty message,omitempty arguments,omitempty result,omitempty truncated,omitempty argBytes,omitempty resultBytes,omitempty isError,omitempty at",
	} {
		var tags []string
		for f := range typ.Fields() {
			tags = append(tags, f.Tag.Get("json"))
		}
		if got := strings.Join(tags, " "); got != want {
			t.Errorf("%v has the members %q; encode.go writes %q: update encodeResult/encodeAudit (and this list)", typ, got, want)
		}
	}
}

// decodeResult reads every answer as json.Unmarshal does: encodeResult's answers (read in its
// one pass) and anything else (handed to json.Unmarshal): the same value, or the same error.
func TestDecodeResultMatches(t *testing.T) {
	for _, s := range resultSeeds(t) {
		checkDecodeResult(t, s)
	}
}

func FuzzDecodeResult(f *testing.F) {
	for _, s := range resultSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkDecodeResult)
}

func checkDecodeResult(t *testing.T, data []byte) {
	got, gerr := decodeResult(data)
	var want subjects.CallResult
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("decodeResult(%s): error %v, json.Unmarshal: %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeResult(%s) =\n%#v, json.Unmarshal:\n%#v", data, got, want)
	}
}

func resultSeeds(t testing.TB) [][]byte {
	now := time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.UTC)
	var out [][]byte
	for _, res := range []subjects.CallResult{
		{V: 1, ID: "c-1", Tenant: "local", Tool: "kb__get_document", Status: "ok", Result: json.RawMessage(`{"content":[]}`), Attempts: 1, StartedAt: now, FinishedAt: now},
		{V: 1, ID: "c-2", Tenant: "local", Tool: "kb__x", Status: "refused", Error: &subjects.Error{Code: "forbidden", Message: "no"}, StartedAt: now},
		{V: 1, ID: `odd "id" <&>`, Tenant: "ü", Tool: "\u2028", Status: "ok", Result: json.RawMessage(`{"a":"\u0041"}`), Duplicate: true, FinishedAt: now.In(time.FixedZone("", 3600))},
		{},
	} {
		b, err := encodeResult(res)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, s := range []string{
		`{"v":1,"id":"a","v":2,"id":"b","result":{"x":1},"result":{"y":2}}`, `{"ID":"a"}`, `{"Id":"a","id":"b"}`,
		`{"v":1.0}`, `{"v":1e2}`, `{"v":-0}`, `{"v":null}`, `{"v":"1"}`, `{"v":99999999999999999999}`, `{"attempts":true}`,
		`{"duplicate":null}`, `{"duplicate":1}`, `{"duplicate":false}`, `{"id":null}`, `{"id":1}`, `{"id":"\u0041"}`, "{\"id\":\"\xff\"}",
		`{"startedAt":"2026-13-01T00:00:00Z"}`, `{"startedAt":null}`, `{"startedAt":"2026-12-01T08:00:00+01:00"}`, `{"startedAt":5}`,
		`{"result":null}`, `{"result":[1]}`, `{"result":"s"}`, `{"result":{}} `, ` {"result" : { "a" : 1 } } `,
		`{"error":{"code":"x","message":"y"}}`, `{"error":null}`, `{"new":1,"id":"a"}`, `[]`, `"s"`, `null`, `{`, ``, `{"id":"a"}x`,
	} {
		out = append(out, []byte(s))
	}
	return out
}
