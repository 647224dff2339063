package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// answerFunc writes an embeddings endpoint's answer to a request's inputs.
type answerFunc func(w http.ResponseWriter, inputs []string)

// answerConcepts answers conceptEmbedder's vectors, as an OpenAI-compatible endpoint does.
func answerConcepts(w http.ResponseWriter, inputs []string) {
	vecs, _ := (&conceptEmbedder{}).Embed(context.Background(), inputs)
	answerVectors(w, vecs)
}

func answerVectors(w http.ResponseWriter, vecs [][]float32) {
	data := make([]map[string]any, len(vecs))
	for i, v := range vecs {
		data[i] = map[string]any{"index": i, "embedding": v}
	}
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// switchableServer is an embeddings endpoint on loopback that answers with what answer holds
// (answerConcepts until it is changed). It counts the requests holding a text with the prefix
// counted.
func switchableServer(t *testing.T, counted string) (srv *httptest.Server, answer *atomic.Pointer[answerFunc], requests *atomic.Int64) {
	t.Helper()
	answer, requests = &atomic.Pointer[answerFunc]{}, &atomic.Int64{}
	concepts := answerFunc(answerConcepts)
	answer.Store(&concepts)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		if counted != "" && len(req.Input) > 0 && strings.HasPrefix(req.Input[0], counted) {
			requests.Add(1)
		}
		(*answer.Load())(w, req.Input)
	}))
	t.Cleanup(srv.Close)
	return srv, answer, requests
}

// TestHybridMalformedQueryAnswerHeldOff: a 2xx answer to a request's embedding that is not an
// embeddings response (a proxy's error page with status 200, a wrong count or dimension, values
// that are not finite numbers, a zero vector) embeds no text at all, not even the probe text
// that goes with it and that the endpoint embedded before: the endpoint is failing, as when it
// answers 503. It used to count as the endpoint refusing that request's text, which holds off
// nothing, so every search went on asking the broken endpoint (paying its latency).
func TestHybridMalformedQueryAnswerHeldOff(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	const prefix = "list incidents"
	srv, answer, requests := switchableServer(t, prefix)
	var logs lockedBuffer
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}
	r := startReplicaConfig(t, env, Config{Embedder: emb, Log: zerolog.New(&logs).Level(zerolog.WarnLevel)}, nil)
	r.Catalog.mu.Lock()
	r.Catalog.embedRetryMin = time.Hour // a hold-off, if any, lasts the whole subtest
	r.Catalog.mu.Unlock()
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	raw := func(body string) answerFunc {
		return func(w http.ResponseWriter, _ []string) { w.Write([]byte(body)) }
	}
	cases := []struct {
		name   string
		answer answerFunc
		want   string // in the logged error
	}{
		{"not JSON", raw("<html><body>502 Bad Gateway</body></html>"), "embeddings_malformed"},
		{"one vector for two texts", raw(`{"data":[{"index":0,"embedding":[0,1,0,0,0.05]}]}`), "1 embeddings for 2 inputs"},
		{"dimensions differ", raw(`{"data":[{"index":0,"embedding":[0,1,0]},{"index":1,"embedding":[0,1,0,0,0.05]}]}`), "dimensions"},
		{"NaN", raw(`{"data":[{"index":0,"embedding":[NaN,1,0,0,0.05]},{"index":1,"embedding":[0,1,0,0,0.05]}]}`), "embeddings_malformed"},
		{"infinite", raw(`{"data":[{"index":0,"embedding":[1e999,1,0,0,0.05]},{"index":1,"embedding":[0,1,0,0,0.05]}]}`), "not a float32"},
		// The probe text's vector too: not another model (whose probe vector would be
		// usable), an endpoint that embeds nothing.
		{"zero vectors for every text", func(w http.ResponseWriter, inputs []string) {
			vecs := make([][]float32, len(inputs))
			for i := range vecs {
				vecs[i] = make([]float32, 5)
			}
			answerVectors(w, vecs)
		}, "probe text sent with the request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.Catalog.embedDown.wait.Store(0)
			r.Catalog.embedDown.until.Store(0)
			answer.Store(&tc.answer)
			before := requests.Load()
			for i := range 5 {
				rep := find(t, r.Catalog, fmt.Sprintf("%s %s %d", prefix, tc.name, i))
				mustNoErr(t, rep.Error)
				if got := names(rep.Tools); len(got) == 0 || got[0] != "desk__list_incidents" || rep.Ranking != subjects.RankingLexical {
					t.Fatalf("search %d with a malformed answer: %v (%s), want desk__list_incidents first, lexically", i, got, rep.Ranking)
				}
			}
			if n := requests.Load() - before; n != 1 {
				t.Errorf("the malformed endpoint was asked %d times in 5 searches, want once (then held off)", n)
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("no warning naming the problem (%q) in the log:\n%s", tc.want, logs.String())
			}
		})
	}
	// A good answer again: the hold-off over, the next search is hybrid.
	concepts := answerFunc(answerConcepts)
	answer.Store(&concepts)
	r.Catalog.embedDown.until.Store(0)
	if rep := find(t, r.Catalog, "will it rain tomorrow"); rep.Ranking != subjects.RankingHybrid {
		t.Errorf("after the endpoint recovered: ranking %s, want hybrid", rep.Ranking)
	}

	// A zero vector for one search's text while the probe text's vector in the same answer is
	// fine: that text embeds to nothing (like a 400 for it), the endpoint works. That search is
	// lexical and its vector not cached; the endpoint is not held off, so the next search with
	// another text is hybrid at once.
	zeroFor := prefix + " embeds to nothing"
	zeroText := answerFunc(func(w http.ResponseWriter, inputs []string) {
		vecs, _ := (&conceptEmbedder{}).Embed(context.Background(), inputs)
		for i, in := range inputs {
			if in == zeroFor {
				vecs[i] = make([]float32, len(vecs[i]))
			}
		}
		answerVectors(w, vecs)
	})
	answer.Store(&zeroText)
	before := requests.Load()
	for i := range 3 {
		if rep := find(t, r.Catalog, zeroFor); rep.Ranking != subjects.RankingLexical {
			t.Fatalf("search %d of a text that embeds to a zero vector: ranking %s, want lexical", i, rep.Ranking)
		}
	}
	if n := requests.Load() - before; n != 3 {
		t.Errorf("a text that embeds to a zero vector: the endpoint was asked %d times in 3 searches, want 3 (nothing cached, nothing held off)", n)
	}
	if rep := find(t, r.Catalog, "will it snow tomorrow"); rep.Ranking != subjects.RankingHybrid {
		t.Errorf("another text after a zero vector for one: ranking %s, want hybrid (the endpoint is not held off)", rep.Ranking)
	}
}

// funcEmbedder embeds with fn (an Embedder that is not an HTTP endpoint).
type funcEmbedder func(texts []string) [][]float32

func (funcEmbedder) Name() string { return "func" }

func (f funcEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return f(texts), nil
}

// TestHybridProbeRefusesDegenerateEmbedder: an embedder whose vectors have no direction (all
// zero, NaN), or the same direction for every text, ranks nothing: the cosine with a zero
// vector is undefined, and a constant vector gives every tool the same cosine, so the "vector
// ranking" is the tools' names in order, fused into every search. The probe at start refuses it
// with an error that says why; no vector is attached and search stays lexical. The constant
// embedder used to pass the probe (it embeds one text), and its vectors were attached.
func TestHybridProbeRefusesDegenerateEmbedder(t *testing.T) {
	constant := func(w http.ResponseWriter, inputs []string) {
		vecs := make([][]float32, len(inputs))
		for i := range vecs {
			vecs[i] = []float32{0.3, 0.1, 0.2, 0.4}
		}
		answerVectors(w, vecs)
	}
	zero := func(w http.ResponseWriter, inputs []string) {
		vecs := make([][]float32, len(inputs))
		for i := range vecs {
			vecs[i] = make([]float32, 4)
		}
		answerVectors(w, vecs)
	}
	nan := funcEmbedder(func(texts []string) [][]float32 {
		vecs := make([][]float32, len(texts))
		for i := range vecs {
			vecs[i] = []float32{float32(math.NaN()), 1, 0, 0}
		}
		return vecs
	})
	cases := []struct {
		name   string
		answer answerFunc // through the HTTP client
		emb    Embedder   // or this embedder
		want   string     // in the vectorizer's logged error
	}{
		{"the same vector for every text", constant, nil, "the same direction"},
		{"all zero", zero, nil, "zero or non-finite"},
		{"NaN", nil, nan, "zero or non-finite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := natstest.Start(t)
			seq := publish(t, env.JS, hybridEvents()...)
			emb := tc.emb
			if tc.answer != nil {
				srv, answer, _ := switchableServer(t, "")
				answer.Store(&tc.answer)
				emb = &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "m"}
			}
			var logs lockedBuffer
			r := startReplicaConfig(t, env, Config{Embedder: emb, Log: zerolog.New(&logs)}, nil)
			waitSeq(t, r.Catalog, seq)
			waitFor(t, "the probe's refusal or vectors attached", func() bool {
				return strings.Contains(logs.String(), "tool embeddings failed") || r.Catalog.Stats().Vectors > 0
			})
			if n := r.Catalog.Stats().Vectors; n != 0 {
				t.Fatalf("%d vectors of a degenerate embedder attached, want none (the probe refuses it)", n)
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("the vectorizer's error does not say why (%q):\n%s", tc.want, logs.String())
			}
			if rep := find(t, r.Catalog, "list incidents"); rep.Ranking != subjects.RankingLexical {
				t.Errorf("search with a degenerate embedder: ranking %s, want lexical", rep.Ranking)
			}
		})
	}
}
