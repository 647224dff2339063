package indexer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStoreErrorNamedOnce: a write refused for want of disk space is already ErrStore (with
// ErrDiskFull), and the value log GC pass and the origin check wrapped it in ErrStore again:
// the log said "catalog store: value log gc: catalog store: not enough free disk space…". It
// is wrapped once, what was being done still named.
func TestStoreErrorNamedOnce(t *testing.T) {
	full := fakeDiskFull(t)
	c, err := Open(Config{Dir: filepath.Join(t.TempDir(), "r")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full.Store(true)
	_, gcErr := c.gcValueLog(context.Background())
	originErr := c.checkOrigin(&jetstream.StreamInfo{Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	for what, err := range map[string]error{"value log gc": gcErr, "write format": originErr} {
		if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrStore) {
			t.Errorf("%s: %v, want ErrDiskFull and ErrStore", what, err)
			continue
		}
		if msg := err.Error(); strings.Count(msg, ErrStore.Error()) != 1 || !strings.Contains(msg, what) {
			t.Errorf("%s: %q, want %q once and %q", what, msg, ErrStore.Error(), what)
		}
	}
}
