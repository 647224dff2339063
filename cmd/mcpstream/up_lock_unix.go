//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on DIR/LOCK so that two `up` processes never share one
// data directory (an embedded NATS server's store, indexer replica 0). The lock ends with the
// process or when unlock is called. The holder writes its pid in the file, and the error a
// second process gets names it.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					holder = fmt.Sprintf(", process %d", pid)
				}
			}
			return nil, fmt.Errorf("data directory %s is in use by another mcpstream process (%s%s; use another --data)", dir, path, holder)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	// Informative only (the lock is the flock): a failure to write it is no reason to stop.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
