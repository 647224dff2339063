package indexer

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// parkedOnStoreMu reports whether a goroutine running fn is blocked taking a read lock (storeMu:
// the only RWMutex a sweep read-locks that the test holds for writing).
func parkedOnStoreMu(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) && strings.Contains(g, "runtime_SemacquireRWMutexR") {
			return true
		}
	}
	return false
}

// TestSweepDoesNotHoldCatalogLockWaitingForGC: a vector cache sweep took c.mu's read lock, then
// waited for storeMu while a value log GC step held it (the rewrite of a whole file). Follow,
// having committed a message, then waited for c.mu's write lock behind the sweep, and every
// query (c.mu.RLock, behind the waiting writer) waited for the file's rewrite: the package doc
// says queries do not. storeMu is now taken before c.mu, so c.mu stays free during a rewrite.
func TestSweepDoesNotHoldCatalogLockWaitingForGC(t *testing.T) {
	c, err := Open(Config{Dir: filepath.Join(t.TempDir(), "r"), Embedder: &conceptEmbedder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	applyAll(t, c, hybridEvents())
	// Stale vectors: texts no tool has.
	const stale = 5
	if err := c.db.Update(func(txn *badger.Txn) error {
		for i := range stale {
			k := sha256.Sum256(fmt.Appendf(nil, "old text %d", i))
			if err := txn.Set(append([]byte(pfxVector), k[:]...), encodeVector([]float32{1, 0})); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	c.storeMu.Lock() // a value log GC step rewriting a file
	done := make(chan error, 1)
	go func() { done <- c.sweepVectors() }()
	waitFor(t, "the sweep waiting for the GC step", func() bool { return parkedOnStoreMu("sweepVectors") })
	free := c.mu.TryLock() // what applyMsg takes after its commit; queries queue behind it
	if free {
		c.mu.Unlock()
	}
	c.storeMu.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if !free {
		t.Error("the sweep held the catalog's lock while it waited for a value log GC step: Follow's writes, and every query behind them, wait for the rewrite")
	}
	if n := cachedVectors(t, c); n != 0 {
		t.Errorf("%d cached vectors after the sweep, want 0 (no tool's vector was cached here, and the stale ones go)", n)
	}
}
