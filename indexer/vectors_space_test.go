package indexer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// swappingEmbedder answers with conceptEmbedder's model, or, once swapped, with another model
// of the same dimension under the same name (rotatedEmbedder): an endpoint whose model changes
// while a replica runs (an Ollama tag pulled again, a gateway alias moved, a load balancer over
// two versions).
type swappingEmbedder struct {
	a       conceptEmbedder
	b       rotatedEmbedder
	swapped atomic.Bool
}

func (e *swappingEmbedder) Name() string { return "concepts-v1" }

func (e *swappingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.swapped.Load() {
		return e.b.Embed(ctx, texts)
	}
	return e.a.Embed(ctx, texts)
}

// TestHybridModelSwappedWhileRunning: the probe used to be embedded only when a replica
// started, so a model swapped under the endpoint's name while it ran had its vectors attached
// among the old model's (for the tools that changed), and its request vectors ranked against
// the old model's tool vectors: a ranking across unrelated vector spaces, until a restart.
// Every response now carries the probe, and one whose probe is not the space's is not used.
func TestHybridModelSwappedWhileRunning(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &swappingEmbedder{}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Fatalf("hybrid search: %v, want meteo__get_outlook first", got)
	}

	// Swapped; then a tool arrives: its vector must not join the old model's.
	emb.swapped.Store(true)
	seq = publish(t, env.JS, status("billing", subjects.StatusReady),
		snapshot("billing", "Accounts", tool("settle", "Settles an invoice.")))
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 4)
	if got := names(find(t, r.Catalog, "is rain coming").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("after the swap and a new tool: %v, want meteo__get_outlook first (one vector space)", got)
	}
	if got := names(find(t, r.Catalog, "refund payment").Tools); len(got) == 0 || got[0] != "billing__settle" {
		t.Errorf("after the swap and a new tool: %v, want billing__settle first", got)
	}

	// Swapped back, no tool changing: a request's vector of the other space is not ranked
	// against the tools' (lexical meanwhile), and the tools are embedded again.
	emb.swapped.Store(false)
	waitFor(t, "hybrid search in the first model's space again", func() bool {
		got := names(find(t, r.Catalog, "umbrella forecast").Tools)
		return len(got) > 0 && got[0] == "meteo__get_outlook" && r.Stats().Vectors == 4
	})
	for _, q := range []string{"will it rain tomorrow", "is rain coming", "refund payment"} {
		got := names(find(t, r.Catalog, q).Tools)
		want := map[string]string{"refund payment": "billing__settle"}[q]
		if want == "" {
			want = "meteo__get_outlook"
		}
		if len(got) == 0 || got[0] != want {
			t.Errorf("%q in the first model's space again: %v, want %s first", q, got, want)
		}
	}
}
