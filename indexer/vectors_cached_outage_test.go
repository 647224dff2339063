package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestHybridCachedVectorAttachedInOutage: a tool whose definition changed without changing
// its text (a parameter's type) has its vector in the cache, and needs no request to the
// endpoint. In a batch with a text that is not cached, while the endpoint is down, its cached
// vector was dropped with the batch's failure: the tool stayed lexical for the whole outage,
// its vector a read away.
func TestHybridCachedVectorAttachedInOutage(t *testing.T) {
	env := natstest.Start(t)
	emb := &conceptEmbedder{}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	seq := publish(t, env.JS, hybridEvents()...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	emb.setFail(true)
	// get_outlook: only its parameter's type changes (its text, and so its cached vector, do
	// not); umbrella_tips: new, its text never embedded.
	seq = publish(t, env.JS, snapshot("meteo", "Meteorological data",
		tool("get_outlook", "Temperature outlook for a city, sunny or not.", "inputSchema", `{"type":"object","properties":{"city":{"type":"number"}}}`),
		tool("umbrella_tips", "Umbrella advice."),
	))
	waitSeq(t, r.Catalog, seq)
	waitFor(t, "the cached vector attached, the new tool's pending", func() bool {
		st := r.Catalog.Stats()
		return st.Vectors == 3 && st.VectorsPending == 1
	})

	emb.setFail(false)
	waitVectors(t, r.Catalog, 4)
}

// stallingEmbedder is a conceptEmbedder whose endpoint can be taken down: while down, every
// call fails, and the second failing call waits for release (or its context) before failing,
// so that a test sees the catalog as the vectorizer left it after one failed batch.
type stallingEmbedder struct {
	conceptEmbedder
	down     atomic.Bool
	failures atomic.Int64
	release  chan struct{}
}

func (e *stallingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if !e.down.Load() {
		return e.conceptEmbedder.Embed(ctx, texts)
	}
	if e.failures.Add(1) == 2 {
		select {
		case <-e.release:
		case <-ctx.Done():
		}
	}
	return nil, errors.New("embedder down")
}

// TestHybridCachedVectorsAllAttachedInOutage: during an outage, a batch picks at most
// embedBatch wants in map order and is tried once per backoff (up to a minute, or an hour's
// Retry-After): among many new tools, a tool whose text is cached waited for the batches that
// happened to pick it, one per backoff. Every cached vector is attached after the first failed
// batch, before the endpoint is asked again.
func TestHybridCachedVectorsAllAttachedInOutage(t *testing.T) {
	env := natstest.Start(t)
	emb := &stallingEmbedder{release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(emb.release)
		}
	}()
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	seq := publish(t, env.JS, hybridEvents()...)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	emb.down.Store(true)
	// get_outlook: only its parameter's type changes (its vector is cached); 1000 new tools,
	// none cached, that the batches pick among.
	items := []json.RawMessage{
		tool("get_outlook", "Temperature outlook for a city, sunny or not.", "inputSchema", `{"type":"object","properties":{"city":{"type":"number"}}}`),
	}
	const fresh = 1000
	for i := range fresh {
		items = append(items, tool(fmt.Sprintf("station_%d", i), fmt.Sprintf("Weather station %d readings.", i)))
	}
	seq = publish(t, env.JS, snapshot("meteo", "Meteorological data", items...))
	waitSeq(t, r.Catalog, seq)
	waitFor(t, "the endpoint asked again after a failed batch", func() bool { return emb.failures.Load() >= 2 })
	st := r.Catalog.Stats()
	close(emb.release)
	released = true
	if st.Vectors != 3 || st.VectorsPending != fresh {
		t.Fatalf("after a failed batch: %d vectors, %d pending; want 3 (the cached one attached) and %d", st.Vectors, st.VectorsPending, fresh)
	}
	emb.down.Store(false)
	waitVectors(t, r.Catalog, 3+fresh)
}
