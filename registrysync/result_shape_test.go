package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestNullCallResult: a tools/call answered with "result": null over HTTP was passed on as the
// tool's result (status ok, result null): json.Unmarshal of null into a struct is no error, so
// the check that a result is a JSON object let it through. It is a protocol_error, as on stdio.
func TestNullCallResult(t *testing.T) {
	ts := httptest.NewServer(&nullCall{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "nullres", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("nullres"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "nullres", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError {
		t.Errorf("got result %s, error %+v; want protocol_error", r.Result, r.Error)
	}
}

// nullCall answers every tools/call with a null result.
type nullCall struct{ next http.Handler }

func (n *nullCall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":null}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	n.next.ServeHTTP(w, r)
}
