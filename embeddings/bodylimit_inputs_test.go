package embeddings

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBodyLimitFollowsInputs: a response is bounded by what its inputs can need (an embedding
// of at most 16384 values, each at most 64 bytes of JSON), not only by the 64 MiB a full batch
// may take. A search request's embedding (two texts with the indexer's probe) used to accept,
// and hold in memory while reading it, up to 64 MiB: a gzip bomb of 1 MB (a broken or hostile
// endpoint) cost each waiting search about 130 MiB of heap.
func TestBodyLimitFollowsInputs(t *testing.T) {
	const inputs = 2
	const limit = (inputs + 1) << 20 // 1 MiB per input, and 1 MiB for the rest
	serve := func(size int) *httptest.Server {
		var items []string
		for i := range inputs {
			items = append(items, fmt.Sprintf(`{"index":%d,"embedding":[1,2]}`, i))
		}
		body := `{"data":[` + strings.Join(items, ",") + `]}`
		body += strings.Repeat(" ", size-len(body))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush() // chunked: the read enforces the cap
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	c := &Client{BaseURL: serve(limit).URL, Model: "m"}
	if got, err := c.Embed(t.Context(), texts(inputs)); err != nil || len(got) != inputs {
		t.Fatalf("a response of exactly the cap for %d inputs: %v, %v", inputs, got, err)
	}
	c = &Client{BaseURL: serve(8 << 20).URL, Model: "m"}
	_, err := c.Embed(t.Context(), texts(inputs))
	if err == nil {
		t.Fatalf("a response of 8 MiB for %d inputs (at most %d bytes needed) was accepted", inputs, limit)
	}
	if e := err.(*Error); e.Code != CodeMalformed || !strings.Contains(e.Message, fmt.Sprint(limit)) {
		t.Errorf("error %v: want %s naming the cap %d", err, CodeMalformed, limit)
	}
}
