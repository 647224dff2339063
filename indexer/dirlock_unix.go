//go:build unix

package indexer

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes the lock Badger takes on a catalog directory (flock on the directory itself),
// so that Open checks the directory's files while no other process writes them. ok is false
// when another process holds it.
func lockDir(dir string) (unlock func(), ok bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}
