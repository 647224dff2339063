package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestUpSecondOnSameDataDirNamesTheLock: a second `up` on the data directory of a running one,
// with the same flags (the quick start's `mcpstream up`, twice), found its listeners taken
// before it looked at the lock, and said "--http-listen 127.0.0.1:8080: ... address already in
// use": not the README's "data directory ... is in use by another mcpstream process" naming the
// pid, and changing the ports only led to that. The lock of an existing data directory is
// looked at first.
func TestUpSecondOnSameDataDirNamesTheLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, flag := range []string{"--http-listen", "--nats-listen"} {
		args := []string{"up", "--data", dir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", flag, ln.Addr().String()}
		_, _, err = runCmd(t, ctx, args...)
		if err == nil || !strings.Contains(err.Error(), "is in use by another mcpstream process") {
			t.Errorf("second up on a held data directory, %s taken: %v; want the data directory in use", flag, err)
		}
	}
}
