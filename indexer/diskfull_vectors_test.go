package indexer

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestDiskFullNoEmbeddingThrownAway: with the disk below DiskReserve, the vectorizer cannot
// cache a vector. It used to ask the endpoint first and find out after: every batch's
// embeddings (a paid request, say) were thrown away, none attached, and the batch asked again
// after each backoff for as long as the replica had no registry message to stop it. Nothing is
// asked while the disk is full; once space is freed the tools are embedded and cached.
func TestDiskFullNoEmbeddingThrownAway(t *testing.T) {
	full := fakeDiskFull(t)

	var asked atomic.Int64
	emb := funcEmbedder(func(texts []string) [][]float32 {
		vecs := make([][]float32, len(texts))
		for i, s := range texts {
			if s != probeText {
				asked.Add(1) // (a tool's text)
			}
			vecs[i] = []float32{float32(len(s)), 1, float32(i + 1), 0.5}
		}
		return vecs
	})
	c, err := Open(Config{Dir: filepath.Join(t.TempDir(), "r"), Embedder: emb, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, ev := range []any{
		status("kb", subjects.StatusReady),
		snapshot("kb", "d", tool("search", "Search the docs"), tool("fetch", "Fetch a page")),
	} {
		subject, data := eventMsg(t, ev)
		if err := c.applyMsg(uint64(i+1), subject, data); err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	if err := c.probeSpace(ctx); err != nil { // (the vectorizer's first step)
		t.Fatal(err)
	}
	asked.Store(0)

	full.Store(true)
	for i := range 3 {
		if _, err := c.vectorizeBatch(ctx); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("batch %d with the disk full: %v, want ErrDiskFull", i, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the endpoint embedded %d tools' texts while the disk was full, want 0 (their vectors could not be cached)", n)
	}

	full.Store(false)
	n, err := c.vectorizeBatch(ctx)
	if err != nil || n != 2 {
		t.Fatalf("batch once space is freed: %d settled, %v; want 2", n, err)
	}
	if got := asked.Load(); got != 2 {
		t.Errorf("the endpoint embedded %d tools' texts, want 2", got)
	}
}
