package indexer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

// gatedProbe is a swappingEmbedder whose probe requests (the vectorizer's probeSpace) wait
// at the gate while it is armed.
type gatedProbe struct {
	swappingEmbedder
	armed   atomic.Bool
	batches atomic.Int32 // tool batches embedded by the swapped model (the test makes no search)
	reached chan struct{}
	release chan struct{}
}

func (e *gatedProbe) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	probe := len(texts) > 0 && texts[0] == probeText // a batch ends with it, the probe starts with it
	if probe && e.armed.CompareAndSwap(true, false) {
		close(e.reached)
		<-e.release
	}
	if !probe && e.swapped.Load() {
		e.batches.Add(1)
	}
	return e.swappingEmbedder.Embed(ctx, texts)
}

// A probe that finds the model changed wants every tool again and kicks the vectorizer; a
// search that read the old space meanwhile asks for another probe and kicks it too. One kick
// fits in the channel: the second was dropped, the vectorizer spent the remaining one on the
// second probe (no change) and then waited for a kick that never came, every tool without a
// vector for good (seen once as a timeout of TestHybridModelSwappedWhileRunning under load).
// After a probe the vectorizer now goes on to the tools it wants.
func TestProbeThenWantedToolsWithoutAnotherKick(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &gatedProbe{reached: make(chan struct{}), release: make(chan struct{})}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	emb.swapped.Store(true)
	emb.armed.Store(true)
	r.spaceCheck.Store(true) // as a search whose response was of another space does
	r.vecKick <- struct{}{}
	select {
	case <-emb.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the vectorizer did not probe")
	}
	// While the probe runs: a search that read the old space asks for another probe.
	r.spaceCheck.Store(true)
	r.vecKick <- struct{}{}
	close(emb.release)
	waitFor(t, "every tool embedded again in the new space", func() bool {
		st := r.Stats()
		return emb.batches.Load() > 0 && st.Vectors == 3 && st.VectorsPending == 0
	})
}
