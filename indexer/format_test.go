package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
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

// TestNewerFormatRebuilt: a catalog stored by a newer mcpstream (a downgrade: another format,
// records this version cannot read) was read at Open before the format was looked at, so the
// replica refused to start ("load: bad tool record format") instead of being rebuilt by replay
// as every catalog of another format is. The stored content of another format is not read.
func TestNewerFormatRebuilt(t *testing.T) {
	env := natstest.Start(t)
	last := publish(t, env.JS, demoEvents(t)...)
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, last)
	want := digestOf(t, r.Catalog)
	r.stop(t)

	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keyFormat, []byte(catalogFormat+"1")); err != nil { // a later format
			return err
		}
		// A tool record in an encoding this version does not know, and a server record that
		// is no JSON object.
		if err := txn.Set(toolKey("kb", "newer"), []byte("\x05kb__nQnewer")); err != nil {
			return err
		}
		return txn.Set(serverKey("newer"), []byte(`["v3"]`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, last)
	if got := digestOf(t, r.Catalog); got != want {
		t.Fatalf("digest %s after the downgrade, want %s (rebuilt)", got, want)
	}
	if _, _, ok := r.Lookup("kb__newer"); ok {
		t.Errorf("a tool of the newer store is still there")
	}
}

// TestDowngradedAndUpgradedRebuilt: a catalog of this format that an mcpstream from before
// format keys then followed (a rollback: it knows no m/format, so it goes on from its sequence)
// and that this version opens again (the roll forward) holds what the older version stored for
// the messages it applied: here no rejected definitions of the server it added. It kept the
// format key of this version, so it was taken as current: its answers and digest differed
// from a replica rebuilt now, for good. A catalog whose last commits this version did not make
// is rebuilt.
func TestDowngradedAndUpgradedRebuilt(t *testing.T) {
	env := natstest.Start(t)
	publish(t, env.JS, demoEvents(t)...)
	dir := filepath.Join(t.TempDir(), "r")
	before := publish(t, env.JS, status("rej", subjects.StatusReady))
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, before)
	r.stop(t)
	last := publish(t, env.JS, rejectedSnapshot())
	rebuilt := startReplica(t, env, "", nil, nil)
	waitSeq(t, rebuilt.Catalog, last)
	want := digestOf(t, rebuilt.Catalog)

	// The older version applies the last message as this one would, but without the
	// rejected definitions it did not keep, and moves the sequence (m/seq only).
	type kv struct{ k, v []byte }
	var older []kv
	if err := rebuilt.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			if bytes.HasPrefix(k, []byte(pfxMeta)) || bytes.HasPrefix(k, []byte(pfxVector)) {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if bytes.Equal(k, kindKey("rej", subjects.KindTools)) {
				var km kindRec
				if err := json.Unmarshal(v, &km); err != nil {
					return err
				}
				if len(km.Rejected) == 0 {
					return errors.New("the rebuilt replica kept no rejected definitions")
				}
				km.Rejected, km.RejectedMore = nil, 0
				v, _ = json.Marshal(km)
			}
			older = append(older, kv{k, v})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error {
		for _, w := range older {
			if err := txn.Set(w.k, w.v); err != nil {
				return err
			}
		}
		return txn.Set(keySeq, seqValue(last))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, last)
	if got := digestOf(t, r.Catalog); got != want {
		t.Fatalf("digest %s after rolling back and forward, want %s (rebuilt)", got, want)
	}
	rep := r.Servers(context.Background(), subjects.ServersRequest{V: 1, After: "logging"})
	if rep.Error != nil || len(rep.Servers) == 0 || rep.Servers[0].Name != "rej" || len(rep.Servers[0].Rejected) == 0 {
		t.Errorf("rej after rolling back and forward: %+v %+v; want its rejected definitions", rep.Error, rep.Servers)
	}
}
