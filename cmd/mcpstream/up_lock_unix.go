//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive lock on DIR/LOCK so that two `up` processes never share one
// data directory (an embedded NATS server's store, indexer replica 0). The lock ends with the
// process or when unlock is called.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another mcpstream process (use another --data)", dir)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return func() { f.Close() }, nil
}
