package registrysync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/mcpstream/mcpstream/subjects"
)

// manyTools answers tools/list with n tiny tools in one page, the rest as next does.
type manyTools struct {
	next http.Handler
	n    int
}

func (mt *manyTools) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			var b strings.Builder
			b.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[`)
			for i := range mt.n {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{"type":"object"}}`, i)
			}
			b.WriteString(`]}}`)
			_, _ = io.WriteString(w, b.String())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	mt.next.ServeHTTP(w, r)
}

// A list of more than subjects.MaxSnapshotItems tools is snapshot_too_large, though it fits
// in an event (about 4.7 MB of 8 MiB): every consumer refuses such a snapshot (DecodeRegistry),
// so publishing it would show the server ready with tools nobody holds. Before, the bound was
// only the event's size divided by the least an item takes (about 645,000 items).
func TestListOverMaxSnapshotItems(t *testing.T) {
	ts := httptest.NewServer(&manyTools{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})), n: subjects.MaxSnapshotItems + 1})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "many", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	waitUntil(t, "a verdict", func() bool { return h.m.Statuses()["many"].Status != subjects.StatusConnecting })
	if st := h.m.Statuses()["many"]; st.Code != subjects.CodeSnapshotTooLarge {
		t.Errorf("status %s %s %q, want %s", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}
