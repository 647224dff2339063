package indexer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// DefaultGCInterval is the default of Config.GCInterval.
const DefaultGCInterval = 5 * time.Minute

// Value log garbage collection (see the package doc, State).
const (
	// gcDiscardRatio: a value log file is rewritten once at least half of it is garbage by the
	// discard statistics (Badger's documented default).
	gcDiscardRatio = 0.5
	// gcMaxFiles bounds the value log files one pass rewrites (each rewrite reads a whole file
	// and writes its live values again), so that a pass ends soon after Follow's context does.
	gcMaxFiles = 16
)

// gcPass is what one value log GC pass did.
type gcPass struct {
	Rewritten     int   // value log files rewritten (and deleted, or to be once no iterator reads them)
	Before, After int64 // bytes of the value log files before and after
}

// gcInterval is Config.GCInterval or its default (< 0: never).
func (c Config) gcInterval() time.Duration {
	if c.GCInterval == 0 {
		return DefaultGCInterval
	}
	return c.GCInterval
}

// gcLoop runs a value log GC pass every interval until ctx ends (Follow runs it, on disk only).
func (c *Catalog) gcLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.gcValueLog(ctx); err != nil && !errors.Is(err, ErrClosed) {
			c.log.Warn().Err(err).Msg("value log garbage collection failed; trying again at the next pass")
		}
	}
}

// gcValueLog runs one pass of Badger's value log garbage collection: it rewrites the value log
// files that the discard statistics (which compactions of the LSM tree produce) find at least
// gcDiscardRatio garbage, one per RunValueLogGC call, until none is left, ctx ends or it
// rewrote gcMaxFiles. Badger never rewrites the active file (the last one). Nothing for an
// in-memory catalog (it has no value log). A pass after Close returns ErrClosed.
//
// Each RunValueLogGC call holds storeMu, which every write of the catalog holds for reading:
// DropAll and Close wait for the file being rewritten, and no write of the catalog runs during a
// rewrite. (Badger v4.9.6's rewrite reads the memtable's highest version, db.MaxVersion,
// without the lock its writes to the memtable take: a rewrite concurrent with a commit is a
// data race.)
func (c *Catalog) gcValueLog(ctx context.Context) (gcPass, error) {
	var p gcPass
	if c.cfg.InMemory {
		return p, nil
	}
	step := func() (bool, error) {
		c.storeMu.Lock()
		defer c.storeMu.Unlock()
		if c.gcClosed {
			return false, ErrClosed
		}
		if err := c.room(); err != nil {
			return false, err // a rewrite copies live values into the active file
		}
		err := c.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return false, nil // nothing (more) to rewrite; or another pass in flight
		}
		return err == nil, err
	}
	start := time.Now()
	p.Before = vlogBytes(c.cfg.Dir)
	var err error
	for p.Rewritten < gcMaxFiles && ctx.Err() == nil {
		var more bool
		if more, err = step(); !more {
			break
		}
		p.Rewritten++
		c.vlogRewrites.Add(1)
	}
	if errors.Is(err, ErrClosed) {
		return p, err
	}
	p.After = vlogBytes(c.cfg.Dir)
	ev := c.log.Debug()
	if p.Rewritten > 0 {
		ev = c.log.Info()
	}
	ev.Int("rewritten", p.Rewritten).Int64("vlog_bytes_before", p.Before).Int64("vlog_bytes", p.After).
		Int64("reclaimed", p.Before-p.After).Dur("took", time.Since(start)).Msg("value log garbage collection")
	if err != nil {
		return p, storeError("value log gc", err) // (c.room refuses with ErrStore)
	}
	return p, nil
}

// writing holds storeMu for a write to the store (see gcValueLog) and returns its release.
func (c *Catalog) writing() func() {
	c.storeMu.RLock()
	return c.storeMu.RUnlock
}

// room is checkRoom for the catalog's directory (always nil in memory): called before each
// write, so that a disk filling up stops the replica with ErrDiskFull before Badger writes into
// space the filesystem does not have.
func (c *Catalog) room() error {
	if c.cfg.InMemory {
		return nil
	}
	return checkRoom(c.cfg.Dir)
}

// update is c.db.Update under storeMu.
func (c *Catalog) update(fn func(txn *badger.Txn) error) error {
	if err := c.room(); err != nil {
		return err
	}
	defer c.writing()()
	return c.db.Update(fn)
}

// commit is commit under storeMu.
func (c *Catalog) commit(ws []write, seq uint64) error {
	if err := c.room(); err != nil {
		return err
	}
	defer c.writing()()
	return commit(c.db, ws, seq)
}

// vlogBytes is the total size of the value log files in dir (0 when it cannot be read). The
// active file counts at its preallocated size (twice the value log file size) until it is
// closed.
func vlogBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".vlog") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, de.Name())); err == nil { // de.Info: no fresh size
			n += fi.Size()
		}
	}
	return n
}
