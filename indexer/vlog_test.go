package indexer

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// smallStore makes the replicas a test opens use Badger's smallest value log files and small
// memtables: several files, and compactions (which produce the discard statistics the value
// log's garbage collection goes by), without a large catalog.
func smallStore(t *testing.T) {
	oldV, oldM := valueLogFileSize, memTableSize
	valueLogFileSize, memTableSize = 1<<20, 64<<10
	t.Cleanup(func() { valueLogFileSize, memTableSize = oldV, oldM })
}

// vlogSize is the total size of the value log files of a Badger directory.
func vlogSize(t testing.TB, dir string) (total int64, files int) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue // deleted meanwhile
		}
		total += fi.Size()
		files++
	}
	return total, len(paths)
}

// churn is rounds of a server's tool list whose large definitions change every round (values in
// the value log), then the server's removal: everything written is garbage but the records of
// the server and the removed tools.
func churn(server string, rounds, tools int) []any {
	rng := rand.New(rand.NewPCG(uint64(len(server)), 7))
	evs := []any{status(server, "ready")}
	buf := make([]byte, 2048)
	for r := range rounds {
		items := make([]json.RawMessage, tools)
		for i := range items {
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
			// 4 KB of hex, far above the value threshold.
			items[i] = tool(fmt.Sprintf("t%02d", i), fmt.Sprintf("round %d %s", r, hex.EncodeToString(buf)))
		}
		evs = append(evs, snapshot(server, "", items...))
	}
	return append(evs, status(server, subjects.StatusRemoved))
}

// applyAll applies events to a catalog directly, after its last sequence.
func applyAll(t *testing.T, c *Catalog, evs []any) {
	t.Helper()
	for _, ev := range evs {
		subject, data := eventMsg(t, ev)
		if err := c.applyMsg(c.Seq()+1, subject, data); err != nil {
			t.Fatal(err)
		}
	}
}

// vlogBound is the most the value log of a churned and collected catalog may hold: the active
// file (preallocated at twice the file size) and one more file, whose garbage only the
// memtable knows of yet (no compaction has seen it), one file's size and a value over.
func vlogBound() int64 { return 2*valueLogFileSize + valueLogFileSize + valueLogFileSize/2 }

// TestValueLogGCReclaimsChurn: the catalog never ran Badger's value log garbage collection, so
// the value log of a replica whose servers re-list changed definitions (or are removed) kept
// every definition ever stored: its disk use grew with the churn, never with the catalog. A GC
// pass now rewrites the value log files that are mostly garbage, and deletes them.
func TestValueLogGCReclaimsChurn(t *testing.T) {
	smallStore(t)
	dir := filepath.Join(t.TempDir(), "r")
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	applyAll(t, c, churn("big", 60, 40)) // about 10 MB of definitions written, none left
	if st := c.Stats(); st.Tools != 0 {
		t.Fatalf("%d tools left", st.Tools)
	}
	written, files := vlogSize(t, dir)
	if files < 4 {
		t.Fatalf("%d value log files (%d bytes), want several", files, written)
	}
	// Badger's compactions (which tell the GC what is garbage) run in the background: passes
	// until the garbage is gone, each rewriting what the discard statistics allow so far.
	var rewritten int
	waitFor(t, "the value log collected", func() bool {
		p, err := c.gcValueLog(context.Background())
		if err != nil {
			t.Fatalf("gc pass: %v", err)
		}
		rewritten += p.Rewritten
		got, left := vlogSize(t, dir)
		return got <= vlogBound() && left <= 2
	})
	got, left := vlogSize(t, dir)
	t.Logf("value log: %d bytes in %d files written; %d bytes in %d files after GC (%d rewritten)",
		written, files, got, left, rewritten)
	// Nothing live was lost: the server record and the removed tools' records are read back.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("reopen after GC: %v", err)
	}
	defer c.Close()
	if s := c.servers["big"]; len(c.removed) != 40 || s == nil || !s.gone() {
		t.Errorf("after GC and reopen: %d removed tools, want 40; server %+v", len(c.removed), s)
	}
}

// TestValueLogGCPeriodic: a following replica runs the GC passes by itself, every
// Config.GCInterval, and stops them when it stops (Close waits for a pass in flight; none runs
// after it).
func TestValueLogGCPeriodic(t *testing.T) {
	smallStore(t)
	env := natstest.Start(t)
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplicaConfig(t, env, Config{Dir: dir, GCInterval: 10 * time.Millisecond}, nil)
	last := publish(t, env.JS, churn("big", 60, 40)...)
	waitSeq(t, r.Catalog, last)
	// Passes run while the messages are applied, so what the last one finds is less settled
	// than in TestValueLogGCReclaimsChurn: the bound is looser, still under half of the ~11 MB
	// the churn writes (which every file kept without GC).
	waitFor(t, "the value log collected", func() bool {
		st := r.Stats()
		return st.ValueLogRewrites > 0 && st.ValueLogBytes <= 5*valueLogFileSize
	})
	if got, _ := vlogSize(t, dir); got != r.Stats().ValueLogBytes {
		t.Errorf("Stats().ValueLogBytes %d, the files hold %d", r.Stats().ValueLogBytes, got)
	}
	r.stop(t)
	if _, err := r.gcValueLog(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("a GC pass after Close: %v, want ErrClosed", err)
	}
}

// TestValueLogGCInMemory: an in-memory catalog has no value log: a pass does nothing, and
// Follow runs none.
func TestValueLogGCInMemory(t *testing.T) {
	c, err := Open(Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	applyAll(t, c, churn("big", 3, 5))
	p, err := c.gcValueLog(context.Background())
	if err != nil || p != (gcPass{}) {
		t.Errorf("in-memory pass: %+v, %v; want nothing done", p, err)
	}
	if st := c.Stats(); st.ValueLogBytes != 0 || st.ValueLogRewrites != 0 {
		t.Errorf("in-memory stats: %d value log bytes, %d rewrites", st.ValueLogBytes, st.ValueLogRewrites)
	}
}
