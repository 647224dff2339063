package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestIndexerOpenErrorHints: `mcpstream indexer` added "is another indexer using this --data
// and --replica?" to every failure to open its catalog, so a catalog that cannot be read (here
// a server record that is no JSON) sent the operator after a lock conflict that was not there,
// and not to the remedy (remove the directory: the replica rebuilds it by replay). The hint is
// given for a directory another process holds, and only then.
func TestIndexerOpenErrorHints(t *testing.T) {
	env := natstest.Start(t)
	data := t.TempDir()
	dir := filepath.Join(data, "indexer", "0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	seq := binary.BigEndian.AppendUint64(nil, 1)
	if err := db.Update(func(txn *badger.Txn) error {
		for k, v := range map[string][]byte{"m/seq": seq, "m/formatseq": seq, "m/format": []byte("2"), "s/x": []byte("not json")} {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err = catRun(t, "indexer", "--nats", env.URL, "--data", data, "--replica", "0")
	if err == nil || !strings.Contains(err.Error(), "another indexer") {
		t.Errorf("a directory held by another process: %v; want the hint at another indexer", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = catRun(t, "indexer", "--nats", env.URL, "--data", data, "--replica", "0")
	if err == nil || strings.Contains(err.Error(), "another indexer") || !strings.Contains(err.Error(), "remove the directory") {
		t.Errorf("an unreadable catalog: %v; want the remedy (remove the directory), not a lock hint", err)
	}
}
