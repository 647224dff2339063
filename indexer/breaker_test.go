package indexer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// blockingEmbedder answers the tools' texts, then, once block is set, holds every call until
// release is closed (an endpoint that accepts connections and never answers).
type blockingEmbedder struct {
	conceptEmbedder
	block   atomic.Bool
	calls   atomic.Int64
	release chan struct{}
	second  chan struct{} // closed at the second call while blocking
	once    sync.Once
}

func (e *blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if !e.block.Load() {
		return e.conceptEmbedder.Embed(ctx, texts)
	}
	if e.calls.Add(1) == 2 {
		e.once.Do(func() { close(e.second) })
	}
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return nil, errors.New("embedder down")
}

// TestEmbedderHoldOffOneProbe: once the hold-off after a failure is over, one search tries the
// embedder again; the searches that come while that try is in flight do not each wait on the
// embedder too (with a hanging endpoint, every search in the next EmbedTimeout would).
func TestEmbedderHoldOffOneProbe(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &blockingEmbedder{release: make(chan struct{}), second: make(chan struct{})}
	r := startReplicaConfig(t, env, Config{Dir: filepath.Join(t.TempDir(), "r"), Embedder: emb, EmbedTimeout: time.Minute}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	// The embedder failed before; its hold-off is over now.
	r.Catalog.embedDown.wait.Store(int64(5 * time.Second))
	r.Catalog.embedDown.until.Store(time.Now().Add(-time.Millisecond).UnixNano())
	emb.block.Store(true)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(emb.release) }) }
	t.Cleanup(release)

	const n = 6
	done := make(chan struct{}, n)
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			r.Catalog.Search(context.Background(), subjects.SearchRequest{V: 1, Query: fmt.Sprintf("list incidents %d", i)})
		}()
	}
	for finished := 0; finished < n-1; {
		select {
		case <-done:
			finished++
		case <-emb.second:
			release()
			t.Fatalf("a second search called the embedder while the first try after the hold-off was in flight (%d searches finished)", finished)
		case <-time.After(30 * time.Second): // a safety net only
			release()
			t.Fatal("searches stuck")
		}
	}
	release()
	<-done
}
