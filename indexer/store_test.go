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
// another replica is told apart (ErrInUse, naming the process that holds it), and never to be
// removed. Tables (Badger's .sst files) damaged alike are refused too, rather than ending the
// process in a panic or being served altered.
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
		} else if holder := fmt.Sprintf("held by process %d", os.Getpid()); !strings.Contains(err.Error(), holder) {
			t.Errorf("a second Open of a directory in use: %v, want it to say %q", err, holder)
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
		// Badger opens the tables in goroutines of its own, where a table it cannot parse
		// panicked: the process ended with a stack trace, at every restart.
		"table zeroed": func(dir string) {
			p := onlyTable(t, dir)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, fi.Size()), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"table cut short": func(dir string) {
			p := onlyTable(t, dir)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		// Badger verifies no block checksum of a table by default: a record stored in one
		// (a status, a list's metadata, a short definition, the sequence) read back altered
		// was loaded and served. Here a server's status, which still decodes.
		"status altered in a table": func(dir string) {
			p := onlyTable(t, dir)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.Index(b, []byte(`"ready"`))
			if at < 0 {
				t.Fatal(`no "ready" status in the table`)
			}
			b[at+1] = 'R'
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"table missing": func(dir string) {
			if err := os.Remove(onlyTable(t, dir)); err != nil {
				t.Fatal(err)
			}
		},
		"MANIFEST garbage": func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("not a manifest"), 0o644); err != nil {
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

// onlyTable returns the replica's one table file (a replica closed after a small catalog).
func onlyTable(t *testing.T, dir string) string {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("tables %v, want one", tables)
	}
	return tables[0]
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

// TestManifestLostAfterUncleanStop: a replica stopped uncleanly (killed, a power loss) leaves
// its last writes in Badger's write-ahead log (.mem), the sequence among them, and the rest in
// tables the MANIFEST lists. Without the MANIFEST (lost or removed by hand) Badger opened an
// empty tree and replayed the log: the catalog claimed its position with almost none of what
// it applied (here seq 104 and no tools), and following the stream from there served that.
// Such a directory is refused as unreadable, with the remedy.
func TestManifestLostAfterUncleanStop(t *testing.T) {
	old := valueLogFileSize
	valueLogFileSize = 1 << 20
	t.Cleanup(func() { valueLogFileSize = old })
	dir := filepath.Join(t.TempDir(), "r")
	seq := uint64(0)
	apply := func(c *Catalog, from, n int) {
		for s := from; s < from+n; s++ {
			var items []json.RawMessage
			for i := range 20 {
				items = append(items, tool(fmt.Sprintf("t%03d", i), fmt.Sprintf("tool %d of s%03d", i, s)))
			}
			for _, ev := range []any{status(fmt.Sprintf("s%03d", s), "ready"), snapshot(fmt.Sprintf("s%03d", s), "", items...)} {
				subject, data := eventMsg(t, ev)
				seq++
				if err := c.applyMsg(seq, subject, data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	apply(c, 0, 50)
	if err := c.Close(); err != nil { // the tables
		t.Fatal(err)
	}
	if c, err = Open(Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	apply(c, 50, 2) // in the write-ahead log only
	// The directory as a replica killed now leaves it (its files copied while it runs), but
	// for the MANIFEST.
	lost := filepath.Join(t.TempDir(), "lost")
	if err := os.Mkdir(lost, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mem bool
	for _, e := range ents {
		if e.Name() == "MANIFEST" || e.Name() == "LOCK" {
			continue
		}
		mem = mem || strings.HasSuffix(e.Name(), ".mem")
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lost, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !mem {
		t.Fatal("no write-ahead log in the directory")
	}
	c, err = Open(Config{Dir: lost})
	if err == nil {
		defer c.Close()
		t.Fatalf("a catalog without its MANIFEST opened at seq %d with %d tools (it applied %d messages, 1040 tools)", c.Seq(), c.Stats().Tools, seq)
	}
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "MANIFEST") || !strings.Contains(err.Error(), "remove the directory") {
		t.Errorf("Open: %v; want ErrUnreadable naming the missing MANIFEST, with the remedy", err)
	}
}

// TestUnusableDirNotUnreadable: a directory Open cannot use (a regular file in its place; one
// it may not write) is a store error naming the directory and the system's reason, not a
// catalog to remove (ErrUnreadable). The permission case needs a user chmod stops (not root);
// the regular file fails for every user.
func TestUnusableDirNotUnreadable(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{file: "not a directory"}
	if os.Geteuid() != 0 {
		ro := filepath.Join(base, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		cases[ro] = "permission denied"
	}
	for dir, why := range cases {
		c, err := Open(Config{Dir: dir})
		if err == nil {
			c.Close()
			t.Errorf("%s: Open succeeded", dir)
			continue
		}
		if !errors.Is(err, ErrStore) || errors.Is(err, ErrUnreadable) || errors.Is(err, ErrInUse) ||
			!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: Open: %v; want ErrStore (not unreadable, not in use) saying %q", dir, err, why)
		}
	}
}
