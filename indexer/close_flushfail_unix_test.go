//go:build unix

package indexer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const envFlushFailChild = "INDEXER_FLUSHFAIL_CHILD"

// TestCloseReturnsWhenFlushFails: once Badger cannot create files in the replica's directory
// mid-run (made read-only, EACCES, EIO; here the process's descriptor limit, EMFILE), the next
// commit fails and Follow stops with ErrStore, as it should. But the role then closes the
// catalog, and Badger's Close flushes its memtable, retrying a failed flush once a second for
// ever: Close never returned, so the role never reported its failure. The replica neither
// served nor consumed, the process did not exit (no restart), and `up` took the indexer for
// running. Close now gives up once the flush has failed a few times, with an error that says
// so; the writes the memtable held stay in Badger's write-ahead log (nothing committed is
// lost: a restart replays them). The limit is the whole process's: it is lowered in a child.
func TestCloseReturnsWhenFlushFails(t *testing.T) {
	if dir := os.Getenv(envFlushFailChild); dir != "" {
		flushFailChild(t, dir)
		return
	}
	dir := filepath.Join(t.TempDir(), "catalog")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCloseReturnsWhenFlushFails$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), envFlushFailChild+"="+dir)
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, s)
	}
	if !strings.Contains(s, "close returned:") {
		t.Fatalf("Close did not return while Badger's flush kept failing:\n%s", s)
	}
	if !strings.Contains(s, "close store=true") {
		t.Errorf("Close returned without a store error:\n%s", s)
	}
	_, after, ok := strings.Cut(s, "committed=")
	if !ok {
		t.Fatalf("no committed sequence:\n%s", s)
	}
	committed, err := strconv.ParseUint(strings.Fields(after)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing committed was lost: the next start replays the write-ahead log.
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("Open after the failure: %v", err)
	}
	defer c.Close()
	if got := c.Seq(); got != committed {
		t.Errorf("seq %d after a restart, want %d (the last commit that succeeded)", got, committed)
	}
}

func flushFailChild(t *testing.T, dir string) {
	oldM := memTableSize
	memTableSize = 1 << 20 // memtables fill, and rotate, after a few messages
	defer func() { memTableSize = oldM }()
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	apply := func(s int) error {
		var items []json.RawMessage
		for i := range 300 {
			items = append(items, tool(fmt.Sprintf("t%03d_%s", i, strings.Repeat("k", 200)), fmt.Sprintf("tool %d of s%03d", i, s)))
		}
		subject, data := eventMsg(t, snapshot(fmt.Sprintf("s%03d", s), "", items...))
		return c.applyMsg(seq+1, subject, data)
	}
	for s := range 20 {
		if err := apply(s); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	next := f.Fd() // the lowest free descriptor: a limit there refuses every new one
	f.Close()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(next)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var applyErr error
	for s := 20; s < 400 && applyErr == nil; s++ {
		if applyErr = apply(s); applyErr == nil {
			seq++
		}
	}
	if applyErr == nil {
		t.Fatal("every commit succeeded without descriptors")
	}
	if c.Seq() != seq {
		t.Fatalf("seq %d, want %d", c.Seq(), seq)
	}
	fmt.Printf("apply: %v\ncommitted=%d\n", applyErr, seq)
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	// Bounded by Badger's own retries (one a second), not by a deadline of the test's.
	for range 10 {
		select {
		case err := <-done:
			fmt.Printf("close returned: %v\nclose store=%v\n", err, errors.Is(err, ErrStore))
			return
		case <-c.flushFailed:
		}
	}
	fmt.Printf("Close still waiting after 10 failed flushes\n")
}
