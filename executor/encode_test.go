package executor

import (
	"bytes"
	"encoding/json"
	"testing"

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
