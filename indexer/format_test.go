package indexer

import (
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestOlderFormatRebuilt: a catalog stored by an mcpstream that stored streams differently (no
// format recorded, or another one) is dropped and rebuilt by replay at start, so a replica
// upgraded in place answers as a replica rebuilt now: same digest, nothing of the old layout
// left (here a record the new code never writes).
func TestOlderFormatRebuilt(t *testing.T) {
	env := natstest.Start(t)
	last := publish(t, env.JS, demoEvents(t)...)
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, last)
	want := digestOf(t, r.Catalog)
	r.stop(t)

	for _, format := range [][]byte{nil, []byte("1")} {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(txn *badger.Txn) error {
			if format == nil {
				if err := txn.Delete(keyFormat); err != nil {
					return err
				}
			} else if err := txn.Set(keyFormat, format); err != nil {
				return err
			}
			return txn.Set(serverKey("left-by-an-older-version"), []byte(`{}`))
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		r := startReplica(t, env, dir, nil, nil)
		waitSeq(t, r.Catalog, last)
		if got := digestOf(t, r.Catalog); got != want {
			t.Fatalf("format %q: digest %s after the upgrade, want %s (rebuilt)", format, got, want)
		}
		r.stop(t)
	}
}
