package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A request that is not valid JSON is audited (its whole message as arguments, at exec.<tenant>
// and on calls.<tenant>) redacted as text: the value of a sensitive key that is an array, or not
// JSON at all, was kept as it came (the key/value pattern of redactKeysText matches only a
// string, number or literal value). It is now redacted as a valid JSON document is, as far as
// the text is one (redactPrefix), the rest left out.
func TestRedactInvalidJSONSensitiveValues(t *testing.T) {
	r := newRedactor([]string{"Zq9s3cr3tV4lue"})
	for _, in := range []string{
		`{"v":1,"id":"a","tool":"x","arguments":{"api_key":["sk-live-123"]}`,
		`{"v":1,"id":"a","tool":"x","arguments":{"password":["sk-live-123"]}} trailing`,
		`{"v":1,"id":"a","tool":"x","arguments":{"password":[["sk-live-123"],1]`,
		`{"v":1,"id":"a","arguments":{"password" : 'sk-live-123'}}`,
		`{"v":1,"id":"a","arguments":{"password":sk-live-123}}`,
		`{"v":1,"id":"a","arguments":{"token":"sk-live-123"}} {`,
	} {
		out, trunc := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "sk-live") || !json.Valid(out) {
			t.Errorf("%s: got %s", in, out)
		}
		if !trunc {
			t.Errorf("%s: not marked truncated, though part of it is left out: %s", in, out)
		}
	}
	// What is JSON of it is kept, redacted.
	out, _ := r.JSON([]byte(`{"id":"a","note":"Zq9s3cr3tV4lue","api_key":["k"],"x":1} oops`), 4096)
	if want := `"{\"id\":\"a\",\"note\":\"[redacted]\",\"api_key\":\"[redacted]\",\"x\":1}"`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}

// The same at the front end: a request refused there for not being JSON is audited without the
// array value of its sensitive key.
func TestFrontEndInvalidJSONRedacted(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	body := `{"v":1,"id":"fe-bad-json","tool":"fixture__echo","arguments":{"note":"fe-bad-json-marker","api_key":["sk-live-123"]}`
	if _, err := r.env.NC.RequestWithContext(ctx, subjects.Exec("acme"), []byte(body)); err != nil {
		t.Fatal(err)
	}
	var req []subjects.AuditEvent
	waitFor(t, "the refused request's audit event", func() bool {
		req = r.auditEventsWhere(func(ev subjects.AuditEvent) bool {
			return ev.Type == "audit.request" && strings.Contains(string(ev.Arguments), "fe-bad-json-marker")
		})
		return len(req) > 0
	})
	if strings.Contains(string(req[0].Arguments), "sk-live-123") {
		t.Errorf("the array value of api_key is in the audit event: %s", req[0].Arguments)
	}
}

// Text that is not JSON from its start is redacted as text: a sensitive key's value that the
// key/value pattern does not take whole (an array, a bare word, a number run into letters) was
// kept, whole or in part. The text is now cut where such a value starts.
func TestRedactTextSensitiveValues(t *testing.T) {
	r := newRedactor(nil)
	for _, in := range []string{
		`x {"api_key":["sk-live-123"]}`,
		`x {"password":sk-live-123}`,
		`x {"password":-sk-live-123}`,
		`x {"password":12sk-live-123}`,
		`x {"password" : 'sk-live-123'}`,
		`x {"token":"t", "secret":[1,"sk-live-123"]}`,
	} {
		out, _ := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "sk-live") || !json.Valid(out) {
			t.Errorf("%s: got %s", in, out)
		}
	}
	// A value taken whole is replaced, and the text goes on.
	out, _ := r.JSON([]byte(`x {"password":"p", "n":12, "token":true, "note":"kept"}`), 4096)
	if want := `"x {\"password\":\"[redacted]\", \"n\":12, \"token\":\"[redacted]\", \"note\":\"kept\"}"`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
