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

// embeddingsServer is an OpenAI-compatible embeddings endpoint on loopback that answers with
// conceptEmbedder's vectors, except that a request holding a text with refuse in it is answered
// with refuseStatus (as text-embeddings-inference answers 413 to an input longer than its
// model takes). It counts the requests.
func embeddingsServer(t *testing.T, refuse string, refuseStatus int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	concept := &conceptEmbedder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		if refuse != "" && slices.ContainsFunc(req.Input, func(s string) bool { return strings.Contains(s, refuse) }) {
			http.Error(w, `{"error":"Input validation error: inputs must have less than 512 tokens"}`, refuseStatus)
			return
		}
		vecs, _ := concept.Embed(r.Context(), req.Input)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]item, len(vecs))
		for i, v := range vecs {
			data[i] = item{i, v}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// TestHybridOneRefusedText: an endpoint that refuses one tool's text (too long for its model)
// must not keep the other tools of its batch from their vectors: they used to be retried
// together, forever, and never got one.
func TestHybridOneRefusedText(t *testing.T) {
	env := natstest.Start(t)
	evs := append(hybridEvents(),
		status("wiki", subjects.StatusReady),
		snapshot("wiki", "Knowledge base",
			tool("dump_everything", "TOOLONG "+strings.Repeat("words and words ", 200))))
	seq := publish(t, env.JS, evs...)
	srv, _ := embeddingsServer(t, "TOOLONG", http.StatusRequestEntityTooLarge)
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3) // every tool but the refused one, and nothing left pending
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("hybrid search: %v, want meteo__get_outlook first", got)
	}
}

// TestHybridRefusedQueryNoHoldOff: an endpoint that refuses one request's text (too long for
// its model) answered, at once: that says nothing of the next request. It used to hold off
// request embeddings for every searcher (5 s, then up to a minute after each such request),
// so one caller sending long queries kept search lexical for all.
func TestHybridRefusedQueryNoHoldOff(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	srv, requests := embeddingsServer(t, "TOOLONG", http.StatusRequestEntityTooLarge)
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	r.Catalog.embedRetryMin = time.Hour // a hold-off, if any, lasts the whole test
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	rep := find(t, r.Catalog, "TOOLONG "+strings.Repeat("list incidents ", 100))
	mustNoErr(t, rep.Error)
	if got := names(rep.Tools); len(got) == 0 || got[0] != "desk__list_incidents" {
		t.Errorf("refused request: %v, want its lexical answer", got)
	}
	before := requests.Load()
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("the next request: %v, want meteo__get_outlook first (through its vector)", got)
	}
	if requests.Load() == before {
		t.Error("the next request was not embedded: request embeddings are held off")
	}
}

// TestHybridRefusedTextAskedAgain: a tool text the endpoint refused is not given up on until
// the tool changes: a refusal may pass (a proxy answering 400 in an outage, a model limit
// raised), so it is asked again after a hold-off. It used to stay lexical for the life of the
// process.
func TestHybridRefusedTextAskedAgain(t *testing.T) {
	env := natstest.Start(t)
	var refusing atomic.Bool
	refusing.Store(true)
	concept := &conceptEmbedder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if refusing.Load() && slices.ContainsFunc(req.Input, func(s string) bool { return strings.Contains(s, "TOOLONG") }) {
			http.Error(w, `{"error":"Input validation error: inputs must have less than 512 tokens"}`, http.StatusRequestEntityTooLarge)
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
	r.Catalog.refusedRetry = 20 * time.Millisecond // before any tool: the test does not wait a minute
	r.Catalog.mu.Unlock()
	seq := publish(t, env.JS, append(hybridEvents(),
		status("wiki", subjects.StatusReady),
		snapshot("wiki", "Knowledge base", tool("dump_everything", "TOOLONG umbrella rain forecast")))...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3) // the refused text set aside: nothing pending
	refusing.Store(false)
	waitVectors(t, r.Catalog, 4)
	if got := names(find(t, r.Catalog, "will it be sunny").Tools); !slices.Contains(got, "wiki__dump_everything") {
		t.Errorf("hybrid search: %v, want wiki__dump_everything among them (through its vector)", got)
	}
}

// cachedVectors counts the vector cache's entries in c's store (the probe aside).
func cachedVectors(t *testing.T, c *Catalog) int {
	t.Helper()
	keys, err := c.vectorKeys(func([]byte) bool { return true })
	if err != nil {
		t.Fatalf("count cached vectors: %v", err)
	}
	return len(keys)
}

// TestHybridVectorCacheBoundedWhileRunning: a server whose descriptions change at every listing
// (a timestamp in them) makes a new text, hence a new cached vector, per tool and listing. The
// cache was swept only at Open, so it grew on disk without bound until a restart; it must stay
// within twice the tools plus vectorSweepSlack (and a batch) while the replica runs, and never
// lose the vector of a tool that still has its text: a restart embeds nothing but the probe.
func TestHybridVectorCacheBoundedWhileRunning(t *testing.T) {
	env := natstest.Start(t)
	srv, requests := embeddingsServer(t, "", 0)
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}
	dir := t.TempDir()
	r := startReplicaConfig(t, env, Config{Dir: dir, Embedder: emb}, nil)
	seq := publish(t, env.JS, append(hybridEvents(), status("clock", subjects.StatusReady))...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	const clockTools = 8
	live := 3 + clockTools
	bound := 2*live + vectorSweepSlack + embedBatch
	rounds := 2*bound/clockTools + 1 // enough new texts to pass the bound twice over
	maxSeen := 0
	for round := range rounds {
		items := make([]json.RawMessage, clockTools)
		for i := range items {
			items[i] = tool(fmt.Sprintf("tick_%d", i), fmt.Sprintf("Reports the time; listed at round %d.", round))
		}
		seq = publish(t, env.JS, snapshot("clock", "Clock", items...))
		waitSeq(t, r.Catalog, seq)
		waitVectors(t, r.Catalog, live)
		maxSeen = max(maxSeen, cachedVectors(t, r.Catalog))
	}
	if maxSeen > bound {
		t.Errorf("vector cache held up to %d entries over %d listings of %d live tools, want at most %d (2 × tools + %d + a batch of %d)",
			maxSeen, rounds, live, bound, vectorSweepSlack, embedBatch)
	}

	// Nothing a live tool uses was removed: a restart finds every vector in the cache and asks
	// the endpoint for the probe only.
	r.stop(t)
	before := requests.Load()
	r2 := startReplicaConfig(t, env, Config{Dir: dir, Embedder: emb}, nil)
	waitSeq(t, r2.Catalog, seq)
	waitVectors(t, r2.Catalog, live)
	if got := requests.Load() - before; got != 1 {
		t.Errorf("after a restart %d embedding requests, want 1 (the probe): a live tool's vector was swept", got)
	}
	if n := cachedVectors(t, r2.Catalog); n > live {
		t.Errorf("after a restart the cache holds %d vectors, want at most the %d live tools'", n, live)
	}
}
