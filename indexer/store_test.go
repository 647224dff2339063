package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestUnreadableCatalogRefusedWithRemedy: a replica directory whose records cannot be read (a
// value that no longer decodes; a value log cut short, as a disk or a copy may leave it) is
// refused at Open, never served in part. The error used to name only the key and the decoder's
// complaint ("catalog store: load: key ...: bad tool record: ... magic number mismatch"), and the
// indexer command added "is another indexer using this --data and --replica?", which sent the
// operator after a lock conflict that was not there. The catalog holds nothing the registry
// stream does not: the error says so, names the directory and says to remove it to rebuild by
// replay; after which the replica holds what a replica built now holds. A directory held by
// another replica is told apart (ErrInUse), and never to be removed.
func TestUnreadableCatalogRefusedWithRemedy(t *testing.T) {
	env := natstest.Start(t)
	last := publish(t, env.JS, demoEvents(t)...)
	fresh := startReplica(t, env, "", nil, nil)
	waitSeq(t, fresh.Catalog, last)
	want := digestOf(t, fresh.Catalog)

	build := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		r := startReplica(t, env, dir, nil, nil)
		waitSeq(t, r.Catalog, last)
		_, err := Open(Config{Dir: dir})
		if err == nil || !errors.Is(err, ErrInUse) || errors.Is(err, ErrUnreadable) {
			t.Errorf("a second Open of a directory in use: %v, want ErrInUse", err)
		}
		r.stop(t)
		return dir
	}
	damage := map[string]func(dir string){
		"undecodable tool record": func(dir string) {
			db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(txn *badger.Txn) error {
				return txn.Set(toolKey("kb", "get_document"), []byte("\x10kb__get_documentz\x00\x01garbage"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"value log cut short": func(dir string) {
			vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
			if len(vlogs) == 0 {
				t.Fatal("no value log")
			}
			fi, err := os.Stat(vlogs[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(vlogs[0], fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		dir := build(strings.ReplaceAll(name, " ", "-"))
		fn(dir)
		c, err := Open(Config{Dir: dir})
		if err == nil {
			c.Close()
			t.Errorf("%s: Open succeeded", name)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrUnreadable) || !errors.Is(err, ErrStore) || errors.Is(err, ErrInUse) ||
			!strings.Contains(msg, dir) || !strings.Contains(msg, "remove") || !strings.Contains(msg, "rebuild") {
			t.Errorf("%s: Open: %v; want ErrUnreadable naming the directory and saying to remove it to rebuild", name, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		r := startReplica(t, env, dir, nil, nil)
		waitSeq(t, r.Catalog, last)
		if got := digestOf(t, r.Catalog); got != want {
			t.Errorf("%s: rebuilt digest %s, want %s", name, got, want)
		}
	}
}

// TestCorruptValueInOlderValueLogRefused: Badger checks the entries of the last value log file
// when it opens a directory, not those of the older ones, and it checked no value's checksum on
// reads (VerifyValueChecksum off): a byte flipped in an older value log file (a disk's silent
// corruption) was read back as stored. A tool definition stored raw (a short one) that still
// parsed was loaded and served altered, unlike every other replica's. Reads now verify the
// checksum, so the replica refuses to open (ErrUnreadable) instead.
func TestCorruptValueInOlderValueLogRefused(t *testing.T) {
	old := valueLogFileSize
	valueLogFileSize = 1 << 20 // Badger's smallest: several files without a large catalog
	t.Cleanup(func() { valueLogFileSize = old })
	dir := filepath.Join(t.TempDir(), "r")
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	def := func(s, i int) json.RawMessage {
		d := tool(fmt.Sprintf("t%03d", i), fmt.Sprintf("tool %03d of s%03d ", i, s))
		// Just under 128 bytes: stored raw ('r'), in the value log.
		pad := 127 - len(d)
		return tool(fmt.Sprintf("t%03d", i), fmt.Sprintf("tool %03d of s%03d %s", i, s, strings.Repeat("x", pad)))
	}
	for s := range 80 {
		var items []json.RawMessage
		for i := range 100 {
			items = append(items, def(s, i))
		}
		for _, ev := range []any{status(fmt.Sprintf("s%03d", s), "ready"), snapshot(fmt.Sprintf("s%03d", s), "", items...)} {
			subject, data := eventMsg(t, ev)
			seq++
			if err := c.applyMsg(seq, subject, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(def(0, 0)) != 127 {
		t.Fatalf("definition of %d bytes, want 127", len(def(0, 0)))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(vlogs)
	if len(vlogs) < 2 {
		t.Fatalf("value log files %v, want several", vlogs)
	}
	b, err := os.ReadFile(vlogs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("tool 007 of s001"))
	if at < 0 {
		t.Fatal("definition not in the first value log file")
	}
	b[at+len("tool 00")] = '8' // "tool 008 of s001": still valid JSON
	if err := os.WriteFile(vlogs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Open(Config{Dir: dir})
	if err == nil {
		defer c.Close()
		c.markReady()
		rep := c.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"s001__t007"}})
		if len(rep.Tools) == 1 {
			t.Fatalf("a corrupted value log opened; s001__t007 reads %q", rep.Tools[0].Description)
		}
		t.Fatalf("a corrupted value log opened: %+v", rep.Error)
	}
	if !errors.Is(err, ErrUnreadable) {
		t.Errorf("Open: %v, want ErrUnreadable", err)
	}
}
