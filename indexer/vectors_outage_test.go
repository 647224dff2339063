package indexer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestHybridOutagePageNotARefusal: in an outage, a proxy may answer every request with 200 and
// an HTML page (or a 400): a malformed answer to a batch of one tool's text then says nothing of
// that text. It was taken for the endpoint refusing the text, which set the tool aside for a
// minute (doubling at each further such answer, up to 6 hours) instead of retrying it with the
// endpoint's backoff: tools changed one at a time during an outage stayed without a vector long
// after it ended. A batch of several was already told apart (its texts are tried alone).
func TestHybridOutagePageNotARefusal(t *testing.T) {
	env := natstest.Start(t)
	var outage atomic.Bool
	var seenInOutage atomic.Bool
	concept := &conceptEmbedder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if outage.Load() {
			if slices.ContainsFunc(req.Input, func(s string) bool { return strings.Contains(s, "Umbrella advice") }) {
				seenInOutage.Store(true)
			} else if seenInOutage.Load() {
				// The request that follows the new tool's text (the probe text alone, which
				// tells a refused text from a failing endpoint) gets the page too: the outage
				// ends only once the indexer's whole attempt has met it. Ended by the test
				// instead, it could end between the two requests (a loaded machine): the
				// endpoint then did embed the probe text alone, and the text was refused.
				outage.Store(false)
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>Service temporarily unavailable</body></html>")
			return
		}
		vecs, _ := concept.Embed(r.Context(), req.Input)
		data := make([]map[string]any, len(vecs))
		for i, v := range vecs {
			data[i] = map[string]any{"index": i, "embedding": v}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	r := startReplicaConfig(t, env, Config{Embedder: &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}}, nil)
	r.Catalog.mu.Lock()
	r.Catalog.refusedRetry = time.Hour // a tool set aside as refused stays so for the whole test
	r.Catalog.mu.Unlock()
	seq := publish(t, env.JS, hybridEvents()...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	outage.Store(true)
	seq = publish(t, env.JS, status("wiki", subjects.StatusReady),
		snapshot("wiki", "Knowledge base", tool("rain_gear", "Umbrella advice")))
	waitSeq(t, r.Catalog, seq)
	refused := func() bool {
		r.Catalog.mu.RLock()
		defer r.Catalog.mu.RUnlock()
		return len(r.Catalog.vecRefused) > 0
	}
	waitFor(t, "the outage to end", func() bool { return !outage.Load() || refused() })
	if refused() {
		t.Fatal("the new tool was set aside as refused for an outage's page")
	}
	waitVectors(t, r.Catalog, 4)
}
