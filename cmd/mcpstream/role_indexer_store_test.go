package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/indexer"
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
		for k, v := range map[string][]byte{"m/seq": seq, "m/formatseq": seq, "m/format": []byte(indexer.CatalogFormat), "s/x": []byte("not json")} {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err = boundedRun(t, "indexer", "--nats", env.URL, "--data", data, "--replica", "0")
	if err == nil || !strings.Contains(err.Error(), "another indexer") {
		t.Errorf("a directory held by another process: %v; want the hint at another indexer", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = boundedRun(t, "indexer", "--nats", env.URL, "--data", data, "--replica", "0")
	if err == nil || strings.Contains(err.Error(), "another indexer") || !strings.Contains(err.Error(), "remove the directory") {
		t.Errorf("an unreadable catalog: %v; want the remedy (remove the directory), not a lock hint", err)
	}
}

// boundedRun is catRun for a command expected to fail at start: one that runs instead is
// stopped after a minute (and returns nil, which the caller reports) rather than holding the
// test until the suite's timeout.
func boundedRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	err = run(ctx, args, &o, &e)
	return o.String(), e.String(), err
}
