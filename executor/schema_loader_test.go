package executor

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server's schema never makes the executor fetch anything: $ref, $schema, $dynamicRef and
// relative references under an $id naming a URL or a file are refused invalid_schema, and no
// request reaches a (loopback) server they name.
func TestSchemaNeverFetches(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	u := srv.URL
	for _, schema := range []string{
		`{"$ref":"` + u + `/x"}`,
		`{"$schema":"` + u + `/meta"}`,
		`{"$dynamicRef":"` + u + `/d#x"}`,
		`{"$id":"` + u + `/a/","properties":{"x":{"$ref":"b.json"}}}`,
		`{"$id":"file:///etc/","$ref":"passwd"}`,
		`{"$ref":"file:///etc/passwd"}`,
		`{"$ref":"/etc/passwd"}`,
		`{"$schema":"https://json-schema.org/draft/2099/schema"}`,
	} {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		wantCode(t, validateArguments(tl, []byte(`{"x":1}`)), subjects.CodeInvalidSchema, "not allowed")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the server a schema named", n)
	}
}
