package indexer

import (
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
