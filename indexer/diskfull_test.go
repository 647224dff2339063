package indexer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestDiskFullStopsWithClearError: Badger writes through memory-mapped files it creates at their
// full size without reserving the space, so a disk that fills up ended the replica with SIGBUS
// (a fatal fault in Badger's write goroutine, nothing to recover), in a commit and again at every
// start while the disk stayed full (seen on a 3 MiB tmpfs). A replica whose filesystem has less
// than DiskReserve free must stop with ErrDiskFull before writing, its catalog as it was, refuse
// to open likewise, and resume from its sequence once space is freed. (The free space is faked:
// filling a real filesystem needs a small mount.)
func TestDiskFullStopsWithClearError(t *testing.T) {
	full := fakeDiskFull(t)

	env := natstest.Start(t)
	first := publish(t, env.JS, status("kb", "ready"), snapshot("kb", "docs", tool("search", "Search the docs")))
	dir := filepath.Join(t.TempDir(), "r")
	c, err := Open(Config{Dir: dir, Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followErr := make(chan error, 1)
	go func() { followErr <- c.Follow(ctx, env.JS) }()
	waitSeq(t, c, first)

	full.Store(true)
	publish(t, env.JS, snapshot("kb", "docs", tool("search", "Search the docs"), tool("fetch", "Fetch a page")))
	select {
	case err = <-followErr:
	case <-time.After(30 * time.Second):
		cancel()
		<-followErr
		t.Fatal("Follow went on with a full disk")
	}
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Follow: %v, want ErrDiskFull (and ErrStore) naming %s", err, dir)
	}
	if got := c.Seq(); got != first {
		t.Errorf("seq %d after the refused write, want %d", got, first)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	if c, err := Open(Config{Dir: dir}); !errors.Is(err, ErrDiskFull) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Open with a full disk: %v, want ErrDiskFull", err)
	}

	full.Store(false)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, first+1)
	if got := r.Stats().Applied; got != 1 {
		t.Errorf("applied %d messages after space was freed, want 1 (resumed from its sequence)", got)
	}
	if got := r.Stats().Tools; got != 2 {
		t.Errorf("tools %d, want 2", got)
	}
}

// fakeDiskFull replaces freeSpace, restored at cleanup: while the flag returned is set, every
// filesystem has one byte less than DiskReserve free (else its real free space).
func fakeDiskFull(t *testing.T) *atomic.Bool {
	full := new(atomic.Bool)
	old := freeSpace
	freeSpace = func(dir string) (int64, bool) {
		if full.Load() {
			return DiskReserve() - 1, true
		}
		return old(dir)
	}
	t.Cleanup(func() { freeSpace = old })
	return full
}
