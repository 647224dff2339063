package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/natstest"
)

// gatedEmbedder is a conceptEmbedder whose first call holding a text with gate in it closes
// entered, then waits until release is closed.
type gatedEmbedder struct {
	conceptEmbedder
	gate    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (e *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for _, t := range texts {
		if strings.Contains(t, e.gate) {
			first := false
			e.once.Do(func() { first = true })
			if first {
				close(e.entered)
				<-e.release
			}
			break
		}
	}
	return e.conceptEmbedder.Embed(ctx, texts)
}

// TestHybridToolChangedWhileEmbedding: a tool whose text changes while its old text is being
// embedded ends with the vector of its new text, not the old one's (nor none).
func TestHybridToolChangedWhileEmbedding(t *testing.T) {
	env := natstest.Start(t)
	emb := &gatedEmbedder{gate: "sunny", entered: make(chan struct{}), release: make(chan struct{})}
	seq := publish(t, env.JS, hybridEvents()...)
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	<-emb.entered
	// meteo's tool now speaks of money, while its weather text is being embedded.
	seq = publish(t, env.JS, snapshot("meteo", "Meteorological data",
		tool("get_outlook", "Money outlook: invoice totals.", "inputSchema", `{"type":"object","properties":{"city":{"type":"string"}}}`)))
	waitSeq(t, r.Catalog, seq)
	close(emb.release)
	waitVectors(t, r.Catalog, 3)
	if got := names(find(t, r.Catalog, "refund payment").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("refund payment: %v, want meteo__get_outlook first (its new text's vector)", got)
	}
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) > 0 && got[0] == "meteo__get_outlook" {
		t.Errorf("rain still finds the tool by its old text's vector: %v", got)
	}
}

// TestHybridBrokenAnswerThenRecovers: an endpoint whose answer to the first batch of tools is
// broken (an HTML error page, a 429, no embeddings, not JSON, zero vectors, a repeated index,
// a value past float32) and then answers properly, in reverse order, gives every tool its
// vector: a broken answer loses none.
func TestHybridBrokenAnswerThenRecovers(t *testing.T) {
	for which := range 7 {
		t.Run(fmt.Sprint(which), func(t *testing.T) { brokenThenRecovers(t, which) })
	}
}

func brokenThenRecovers(t *testing.T, which int) {
	env := natstest.Start(t)
	concept := &conceptEmbedder{}
	var reqs atomic.Int64
	kinds := []func(w http.ResponseWriter, in []string){
		func(w http.ResponseWriter, in []string) {
			http.Error(w, "<html><body>502 Bad Gateway</body></html>", 502)
		},
		func(w http.ResponseWriter, in []string) {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", 429)
		},
		func(w http.ResponseWriter, in []string) { fmt.Fprint(w, `{"data":[]}`) },
		func(w http.ResponseWriter, in []string) { fmt.Fprint(w, "\xff\xfe not json") },
		func(w http.ResponseWriter, in []string) {
			var items []string
			for i := range in {
				items = append(items, fmt.Sprintf(`{"index":%d,"embedding":[0,0,0,0,0]}`, i))
			}
			fmt.Fprintf(w, `{"data":[%s]}`, strings.Join(items, ","))
		},
		func(w http.ResponseWriter, in []string) {
			var items []string
			for i := range in {
				items = append(items, fmt.Sprintf(`{"index":%d,"embedding":[%d,1]}`, 0, i))
			}
			fmt.Fprintf(w, `{"data":[%s]}`, strings.Join(items, ","))
		},
		func(w http.ResponseWriter, in []string) {
			var items []string
			for i := range in {
				items = append(items, fmt.Sprintf(`{"index":%d,"embedding":[1e39,1]}`, i))
			}
			fmt.Fprintf(w, `{"data":[%s]}`, strings.Join(items, ","))
		},
	}
	broken := kinds[which]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := int64(0)
		if len(req.Input) > 1 { // a batch of tools (with the probe text), not the probe alone
			n = reqs.Add(1)
		}
		if n == 1 {
			broken(w, req.Input)
			return
		}
		vecs, _ := concept.Embed(r.Context(), req.Input)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]item, len(vecs))
		for i := range vecs {
			j := len(vecs) - 1 - i // reversed order
			data[i] = item{j, vecs[j]}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	r := startReplicaConfig(t, env, Config{Embedder: &embeddings.Client{BaseURL: srv.URL, Model: "m"}}, nil)
	r.Catalog.refusedRetry = 20 * time.Millisecond // before any tool: a text refused is asked again soon
	seq := publish(t, env.JS, hybridEvents()...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("will it rain tomorrow: %v, want meteo__get_outlook first", got)
	}
}
