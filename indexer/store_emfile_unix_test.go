//go:build unix

package indexer

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const envEMFILEChild = "INDEXER_EMFILE_CHILD"

// TestTooManyOpenFilesNotUnreadable: a catalog Open cannot open for want of file descriptors
// (the process's limit reached: EMFILE) is a store error with the system's reason, not a
// catalog to remove (ErrUnreadable, whose remedy would not help). Badger's errors wrap no
// errno, so openBadger tells them apart by their text: "too many open files" was missing from
// its list. The limit is lowered in a child process (it is the whole process's).
func TestTooManyOpenFilesNotUnreadable(t *testing.T) {
	if dir := os.Getenv(envEMFILEChild); dir != "" {
		emfileChild(dir)
		return
	}
	dir := filepath.Join(t.TempDir(), "catalog")
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestTooManyOpenFilesNotUnreadable$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envEMFILEChild+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "too many open files") {
		t.Fatalf("the child's Open did not fail for want of descriptors:\n%s", s)
	}
	if !strings.Contains(s, "store=true unreadable=false inuse=false") {
		t.Errorf("Open with no descriptor left: want ErrStore, not ErrUnreadable:\n%s", s)
	}
}

func emfileChild(dir string) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Println("child:", err)
		return
	}
	next := f.Fd() // the lowest free descriptor: a limit there refuses every new one
	f.Close()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		fmt.Println("child:", err)
		return
	}
	lim := old
	lim.Cur = uint64(next)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("child:", err)
		return
	}
	c, err := Open(Config{Dir: dir})
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if err == nil {
		c.Close()
		fmt.Println("child: Open succeeded")
		return
	}
	fmt.Printf("store=%v unreadable=%v inuse=%v: %v\n", errors.Is(err, ErrStore), errors.Is(err, ErrUnreadable), errors.Is(err, ErrInUse), err)
}
