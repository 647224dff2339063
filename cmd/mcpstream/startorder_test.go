package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestUpPortInUseCreatesNothing: `up` on a port in use (--http-listen or --nats-listen) failed
// as it should, but only after it created its --data directory: on a fresh machine an empty
// ./.mcpstream (with demo/) was left behind. The ports are checked before anything is created.
func TestUpPortInUseCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, flag := range []string{"--http-listen", "--nats-listen"} {
		for _, config := range []bool{false, true} {
			data := filepath.Join(t.TempDir(), "data")
			args := []string{"up", "--data", data, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", flag, ln.Addr().String()}
			if config {
				path := filepath.Join(t.TempDir(), "empty.yaml")
				if err := os.WriteFile(path, []byte("servers: []\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			_, _, err := boundedRun(t, args...)
			if err == nil || !strings.Contains(err.Error(), flag+" "+ln.Addr().String()) {
				t.Errorf("%s on a used port (config %v): %v", flag, config, err)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("up %s on a used port (config %v) created its data directory %s: %v", flag, config, data, err)
			}
		}
	}
}

// TestIndexerInUseBeforeNATS: a standalone indexer whose catalog directory another process holds
// said so only once it had connected to NATS: with NATS away the operator was told about NATS,
// fixed it, and only then learnt of the lock. The catalog is opened before connecting.
func TestIndexerInUseBeforeNATS(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "indexer", "0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, _, err = boundedRun(t, "indexer", "--nats", "nats://127.0.0.1:1", "--data", data, "--replica", "0")
	if err == nil || !strings.Contains(err.Error(), "another indexer") {
		t.Errorf("indexer on a held catalog with NATS away: %v; want the lock reported first", err)
	}
	// A --replica that is no plain name is a usage error found before NATS too.
	_, _, err = boundedRun(t, "indexer", "--nats", "nats://127.0.0.1:1", "--data", data, "--replica", "../x")
	if exitStatus(err) != 2 || !strings.Contains(err.Error(), "--replica") {
		t.Errorf("indexer --replica ../x with NATS away: %v (status %d); want a usage error", err, exitStatus(err))
	}
}

// TestPreparedCatalogReleased: the catalog an indexer opens before connecting is closed when
// the start fails after it (NATS away): a second start on the same --data reports NATS again,
// not a catalog "in use" (the in-process runs share one process, as Badger's lock would be
// held by a leaked catalog). Standalone and under up --nats.
func TestPreparedCatalogReleased(t *testing.T) {
	for _, cmd := range [][]string{
		{"indexer", "--http-listen", ""},
		{"up", "--http-listen", ""},
	} {
		data := t.TempDir()
		for i := range 3 {
			_, _, err := boundedRun(t, append(cmd, "--nats", "nats://127.0.0.1:1", "--data", data)...)
			if err == nil || !strings.Contains(err.Error(), "connect to NATS") {
				t.Fatalf("%s, start %d with NATS away: %v; want the NATS error", cmd[0], i+1, err)
			}
		}
		// And the catalog can be opened (its lock free) once the command returned.
		db, err := badger.Open(badger.DefaultOptions(filepath.Join(data, "indexer", "0")).WithLogger(nil))
		if err != nil {
			t.Fatalf("%s: the catalog after a failed start: %v", cmd[0], err)
		}
		db.Close()
	}
}
