package indexer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/natstest"
)

// lockedBuffer is a log sink safe for the vectorizer's goroutine and the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rateLimitedServer is an embeddings endpoint on loopback answering conceptEmbedder's vectors,
// or, while limited is set (or for a request holding the text limitedText), 429 with
// Retry-After: 120.
func rateLimitedServer(t *testing.T, limited *atomic.Bool, limitedText string) *httptest.Server {
	t.Helper()
	concept := &conceptEmbedder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		if limited.Load() || (limitedText != "" && len(req.Input) > 0 && req.Input[0] == limitedText) {
			w.Header().Set("Retry-After", "120")
			http.Error(w, `{"error":{"message":"Rate limit reached for requests"}}`, http.StatusTooManyRequests)
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
	return srv
}

// TestHybridRetryAfterRequest: a request embedding answered 429 with Retry-After: 120 holds
// off the next request embeddings for those 120 s, not the 5 s of a failure that did not say.
func TestHybridRetryAfterRequest(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	var limited atomic.Bool
	srv := rateLimitedServer(t, &limited, "will it rain tomorrow")
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "concepts"}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)

	find(t, r.Catalog, "will it rain tomorrow")
	if w := time.Duration(r.Catalog.embedDown.wait.Load()); w < 120*time.Second {
		t.Errorf("request embeddings held off for %v after a 429 asking for 120s", w)
	}
}

// TestHybridRetryAfterTools: the vectorizer, answered 429 with Retry-After: 120, asks again
// after those 120 s, not after its own 1 s, 2 s, 4 s...
func TestHybridRetryAfterTools(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	var limited atomic.Bool
	limited.Store(true)
	srv := rateLimitedServer(t, &limited, "")
	var logs lockedBuffer
	emb := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "concepts"}
	r := startReplicaConfig(t, env, Config{Embedder: emb, Log: zerolog.New(&logs)}, nil)
	waitSeq(t, r.Catalog, seq)
	waitFor(t, "the vectorizer's failure logged", func() bool { return strings.Contains(logs.String(), "tool embeddings failed") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "tool embeddings failed") {
			continue
		}
		var rec struct {
			RetryIn float64 `json:"retry_in"` // milliseconds (zerolog's default)
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		if got := time.Duration(rec.RetryIn) * time.Millisecond; got < 120*time.Second {
			t.Errorf("the vectorizer asks again in %v after a 429 asking for 120s", got)
		}
		break
	}
}
