package indexer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// Key prefixes of the Badger layout (see the package doc).
const (
	pfxMeta    = "m/"
	pfxServer  = "s/"
	pfxKind    = "k/"
	pfxTool    = "t/"
	pfxRemoved = "r/"
)

var (
	keySeq    = []byte(pfxMeta + "seq")
	keyStream = []byte(pfxMeta + "stream")
	keyFirst  = []byte(pfxMeta + "first")
	keyFormat = []byte(pfxMeta + "format")
	// keyFormatSeq is the sequence of the last message this code committed (with keySeq, in
	// every commit): an mcpstream from before format keys that followed the catalog since (a
	// rollback) moved keySeq alone, and stored what it applied in its own way.
	keyFormatSeq = []byte(pfxMeta + "formatseq")
)

// pfxApplied keys the listedAt the freshness view applied to a list when it differs from the
// list's own (one ahead of the replica's clock, taken as the time it reached the replica): kept
// with the position, not the content, since it depends on when this replica applied the list.
const pfxApplied = pfxMeta + "at/"

// catalogFormat is the version of what a catalog stores of a stream. Bump it when this code
// would store the same stream differently (2: the definitions left out of the catalog, kept per
// server; 3: the sequence of the ListChanged a list is stale for, which a Confirmed that answers
// it lifts): a catalog of another format is dropped and rebuilt by replay, so that a replica
// upgraded in place holds what a replica rebuilt now holds (the same digest, the same answers).
// So is a catalog whose keyFormatSeq is not its sequence: a version that records no format
// applied its last messages (rolled back to, then forward again), or it was never recorded.
const catalogFormat = "3"

// CatalogFormat is the catalog format this build stores (see catalogFormat): a replica's
// directory recording another is rebuilt by replay.
const CatalogFormat = catalogFormat

// lp is a length-prefixed name, so that any server name (even one holding the bytes of another
// key's separator) is a distinct key prefix.
func lp(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func serverKey(server string) []byte { return append([]byte(pfxServer), server...) }

func kindKey(server string, k subjects.Kind) []byte {
	return append(lp([]byte(pfxKind), server), k...)
}

func kindPrefix(server string) []byte { return lp([]byte(pfxKind), server) }

func appliedKey(server string, k subjects.Kind) []byte {
	return append(lp([]byte(pfxApplied), server), k...)
}

func toolKey(server, tool string) []byte {
	return append(lp([]byte(pfxTool), server), tool...)
}

func toolPrefix(server string) []byte { return lp([]byte(pfxTool), server) }

func removedKey(public string) []byte { return append([]byte(pfxRemoved), public...) }

// splitLP splits a key body "<len><server><rest>".
func splitLP(b []byte) (server, rest string, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return "", "", false
	}
	return string(b[w : w+int(n)]), string(b[w+int(n):]), true
}

// serverRec is the stored state of one server.
type serverRec struct {
	Status      *subjects.Status     `json:"status,omitempty"` // the last one
	Info        *subjects.ServerInfo `json:"info,omitempty"`   // of the last snapshot that had one
	Description string               `json:"description,omitempty"`
	Revoked     []string             `json:"revoked,omitempty"` // sorted
	AllRevoked  bool                 `json:"allRevoked,omitempty"`
}

// kindRec is the stored metadata of a server's last list of one kind.
type kindRec struct {
	Fingerprint string    `json:"fingerprint,omitempty"`
	ListedAt    time.Time `json:"listedAt,omitzero"`
	Pages       int       `json:"pages,omitempty"`
	TTLMs       *int64    `json:"ttlMs,omitempty"`
	CacheScope  string    `json:"cacheScope,omitempty"`
	AuthContext string    `json:"authContext,omitempty"`
	Stale       bool      `json:"stale,omitempty"`
	// StaleSeq is the stream sequence of the ListChanged that made the list stale (the latest
	// applied): a Confirmed whose afterSeq is at least it lifts it (staleness.Answers).
	StaleSeq uint64   `json:"staleSeq,omitempty"`
	Listed   bool     `json:"listed,omitempty"` // a snapshot was applied (not only list_changed)
	Count    int      `json:"count"`
	Names    []string `json:"names,omitempty"` // prompts and resources (tools are t/ keys)
	// Rejected are the list's definitions left out (registrysync's Snapshot.Rejected, then
	// the catalog's own refusals, in item order), at most MaxRejected; RejectedMore counts
	// the others.
	Rejected     []rejRec `json:"rejected,omitempty"`
	RejectedMore int      `json:"rejectedMore,omitempty"`
	// applied is the listedAt the freshness view applied, when it is not ListedAt (which was
	// ahead of the replica's clock when the list or its confirmation came): stored under
	// appliedKey, outside the record, so that what a replica stores of the stream does not
	// depend on its clock.
	applied time.Time
}

// appliedAt is the listedAt the freshness view holds for the list.
func (k *kindRec) appliedAt() time.Time {
	if !k.applied.IsZero() {
		return k.applied
	}
	return k.ListedAt
}

// rejRec is one rejected definition of a list.
type rejRec struct {
	Name    string `json:"name,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// toolRec is one stored tool. It is stored as uvarint(len(public)) public, a format byte and the
// definition: 'r' raw, or 'z' zstd-compressed (definitions are JSON and shrink 2-3×, which keeps
// a 100k-tool replica's value log, and the page cache it maps, small). Never as JSON:
// encoding/json would compact and HTML-escape the definition, which must stay byte-faithful.
type toolRec struct {
	Public string
	Def    json.RawMessage
}

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<16), zstd.WithZeroFrames(true))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(4*MaxDefinitionBytes))
)

func (r toolRec) encode() []byte {
	b := lp(make([]byte, 0, len(r.Public)+len(r.Def)/2+8), r.Public)
	if len(r.Def) >= 128 {
		z := zenc.EncodeAll(r.Def, append(b, 'z'))
		if len(z)-len(b) < len(r.Def) {
			return z
		}
	}
	return append(append(b, 'r'), r.Def...)
}

func decodeToolRec(v []byte) (toolRec, error) {
	pub, rest, ok := splitLP(v)
	if !ok || rest == "" {
		return toolRec{}, errors.New("bad tool record")
	}
	switch rest[0] {
	case 'r':
		return toolRec{Public: pub, Def: json.RawMessage(rest[1:])}, nil
	case 'z':
		def, err := zdec.DecodeAll([]byte(rest[1:]), nil)
		if err != nil {
			return toolRec{}, fmt.Errorf("bad tool record: %w", err)
		}
		return toolRec{Public: pub, Def: def}, nil
	}
	return toolRec{}, fmt.Errorf("bad tool record format %q", rest[0])
}

// removedRec remembers a removed tool's pair, for "removed" answers.
type removedRec struct {
	Seq         uint64 `json:"seq,omitempty"` // stream sequence of the removal (0: before it was kept)
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	CacheScope  string `json:"cacheScope,omitempty"`
	AuthContext string `json:"authContext,omitempty"`
}

// write is one key to set (Value != nil) or delete.
type write struct {
	Key, Value []byte
}

func putJSON(key []byte, v any) write {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own record types are marshaled; they always marshal.
		panic(fmt.Sprintf("indexer: marshal %T: %v", v, err))
	}
	return write{Key: key, Value: b}
}

func seqValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// openBadger opens the replica's store with the small knobs: a replica holding 100k tools stays
// well under 300 MB of RSS (Badger's defaults hold about 600 MB).
func openBadger(cfg Config, log zerolog.Logger, flushFailed chan<- struct{}) (*badger.DB, error) {
	if cfg.InMemory && cfg.Dir != "" {
		return nil, fmt.Errorf("%w: InMemory needs an empty Dir", ErrBadRequest)
	}
	if !cfg.InMemory && cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no Dir (and not InMemory)", ErrBadRequest)
	}
	o := badger.DefaultOptions(cfg.Dir).
		WithInMemory(cfg.InMemory).
		WithLogger(badgerLog{log, flushFailed}).
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueThreshold(valueThreshold(cfg.InMemory)).
		WithValueLogFileSize(valueLogFileSize).
		// Badger checks only the last value log file's entries when it opens: a value of an
		// older file read back corrupted would be loaded and served (a short definition, stored
		// raw, as another one). With the check, Badger reads such a value as empty (it logs,
		// and returns no error), which no record decodes from: Open refuses (ErrUnreadable).
		WithVerifyValueChecksum(true).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithCompression(options.None). // values are in the value log; tables hold keys and small records

		WithMetricsEnabled(false).
		WithDetectConflicts(false) // one writer
	if !cfg.InMemory {
		if err := checkDir(cfg.Dir); err != nil {
			return nil, err
		}
		// Badger's Open writes too (a new memtable, the replayed write-ahead log).
		if err := checkRoom(cfg.Dir); err != nil {
			return nil, err
		}
	}
	db, err := badger.Open(o)
	if err != nil {
		// Badger's errors wrap no sentinel, nor the system's errors (only their text tells
		// them apart).
		msg := err.Error()
		if strings.Contains(msg, "Cannot acquire directory lock") {
			return nil, inUse(cfg.Dir, err)
		}
		// The system's refusals (permissions, space, the process's limits): not the
		// catalog's content, so not a directory to remove.
		for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOTDIR, syscall.EEXIST,
			syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENAMETOOLONG} {
			if strings.Contains(msg, errno.Error()) {
				return nil, fmt.Errorf("%w: open %s: %w", ErrStore, cfg.Dir, err)
			}
		}
		// Anything else is a directory Badger cannot read: a MANIFEST or a key registry
		// damaged, a file it lists missing, a value log it cannot open.
		return nil, unreadable(cfg.Dir, fmt.Errorf("%w: open: %w", ErrStore, err))
	}
	return db, nil
}

// DiskReserve is the free space (bytes) the filesystem of a replica's directory must have for the
// catalog to write: Badger writes its value log, its memtables' logs and its tables through
// memory-mapped files created at their full size without reserving the space (a value log file
// twice valueLogFileSize, a memtable's log twice memTableSize), and a page the filesystem then
// has no room for ends the process (SIGBUS), in a commit or in a background compaction, and
// again at every start while the disk stays full. Refusing to write below the size of the
// files Badger may be writing (the active value log file, the memtables' logs, a compaction's
// tables) turns that into an error that says what to do.
func DiskReserve() int64 { return 2*valueLogFileSize + 8*memTableSize }

// freeSpace is diskFree (a variable: tests fill the disk).
var freeSpace = diskFree

// checkRoom refuses a write (and Open) when dir's filesystem has less than DiskReserve free.
// Where the free space cannot be read (dir not made yet, another system), it allows it.
func checkRoom(dir string) error {
	free, ok := freeSpace(dir)
	if !ok {
		free, ok = freeSpace(filepath.Dir(dir)) // Badger makes dir
	}
	if !ok || free >= DiskReserve() {
		return nil
	}
	return fmt.Errorf("%w: %w: %s has %d MiB free, less than the %d MiB the catalog needs free to write safely; nothing was written: free space there and start the replica again (it resumes from its sequence)",
		ErrStore, ErrDiskFull, dir, free>>20, DiskReserve()>>20)
}

// storeError is err, of the catalog's store while doing what, as ErrStore: wrapped in it unless
// it already is (a write refused by checkRoom is ErrStore and ErrDiskFull: wrapped again, its
// message said "catalog store" twice).
func storeError(what string, err error) error {
	if errors.Is(err, ErrStore) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrStore, what, err)
}

// unreadable is Open's refusal of a catalog it cannot read, with the remedy.
func unreadable(dir string, err error) error {
	return fmt.Errorf("%w: the catalog in %s cannot be read (%w); it holds nothing the registry stream does not: remove the directory to rebuild it by replay",
		ErrUnreadable, dir, err)
}

// inUse is Open's refusal of a directory another process holds, naming that process (Badger
// writes its pid in the directory's LOCK file) when it can.
func inUse(dir string, err error) error {
	holder := ""
	if b, rerr := os.ReadFile(filepath.Join(dir, "LOCK")); rerr == nil {
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
			holder = fmt.Sprintf(" (held by process %d)", pid)
		}
	}
	if err == nil {
		return fmt.Errorf("%w: %w: open %s%s", ErrStore, ErrInUse, dir, holder)
	}
	return fmt.Errorf("%w: %w: open %s%s: %w", ErrStore, ErrInUse, dir, holder, err)
}

// checkDir checks, under Badger's directory lock, the tables the directory's MANIFEST lists
// before Badger opens them: Badger opens each in a goroutine of its own, where a table cut
// short or zeroed (a copy or a disk that lost its end) panics and ends the process, and it does
// not verify a table's block checksums, so a flipped byte in a small record (a status, a list's
// metadata, the sequence, a short definition: all stored in the tables) was loaded and served.
func checkDir(dir string) error {
	unlock, ok, err := lockDir(dir)
	if err != nil {
		return nil // no directory yet (Badger creates it), or Badger says why it cannot
	}
	if !ok {
		return inUse(dir, nil)
	}
	defer unlock()
	if err := checkTables(dir); err != nil {
		return unreadable(dir, fmt.Errorf("%w: %w", ErrStore, err))
	}
	return nil
}

func checkTables(dir string) error {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, fs.ErrNotExist) {
		// Badger writes its MANIFEST before any other file and never removes it. Without it,
		// Badger starts an empty tree, drops the tables and replays its write-ahead logs (the
		// last writes, the sequence among them): a catalog at its position, without most of
		// what it applied.
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); ext == ".sst" || ext == ".mem" || ext == ".vlog" {
				return fmt.Errorf("no %s, but %s", badger.ManifestFilename, e.Name())
			}
		}
		return nil // a new directory: Badger creates the catalog
	}
	if err != nil {
		return nil // Badger says why it cannot read it
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return fmt.Errorf("%s: %w", badger.ManifestFilename, err)
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		name := table.NewFilename(id, dir)
		if err := checkTable(name, id, m.Tables[id].Compression); err != nil {
			return fmt.Errorf("table %s (listed in the MANIFEST): %w", filepath.Base(name), err)
		}
	}
	return nil
}

// checkTable reads one table as Badger does when it opens it (here, where a panic is
// recovered), then verifies the checksum of each of its blocks.
func checkTable(path string, id uint64, comp options.CompressionType) (err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("corrupted: it does not parse")
		}
	}()
	t, err := table.OpenInMemoryTable(data, id, &table.Options{BlockSize: 4 << 10, Compression: comp, ChkMode: options.OnTableRead})
	if err != nil {
		return err
	}
	return t.VerifyChecksum()
}

// MaxDefinitionBytes is the largest tool definition the catalog stores; a larger one is skipped
// (counted in Stats.BadItems). registrysync rejects definitions over 256 KiB by default.
const MaxDefinitionBytes = subjects.MaxDefinitionBytes

// MaxToolNameBytes is the longest tool name the catalog stores (a Badger key holds the name and
// may not exceed 65,000 bytes); a definition with a longer name is skipped (counted in
// Stats.BadItems). registrysync rejects names over 512 bytes.
const MaxToolNameBytes = subjects.MaxToolNameBytes

// valueLogFileSize is the size of a value log file (a variable: tests make several small ones).
var valueLogFileSize int64 = 64 << 20

// memTableSize is the size of a memtable (a variable: tests flush and compact small ones, which
// a value log garbage collection needs: see gcValueLog).
var memTableSize int64 = 8 << 20

// valueThreshold: on disk, every tool record goes to the value log (an append-only file): the
// LSM tree keeps only keys, small records and value pointers, so memtables, transactions and
// compactions stay small (a replica of 100k tools rewrites a few MB, not its definitions); in
// memory there is no value log, so every value must stay under it.
func valueThreshold(inMemory bool) int64 {
	if inMemory {
		return 1 << 20 // Badger's largest (≤ 15% of the memtable: 1.2 MB)
	}
	return 128
}

// commit writes ws and the new sequence atomically; a set of writes too large for one
// transaction is split, the sequence going in the last (see the package doc).
func commit(db *badger.DB, ws []write, seq uint64) error {
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	apply := func(w write) error {
		if w.Value == nil {
			return txn.Delete(w.Key)
		}
		return txn.Set(w.Key, w.Value)
	}
	for _, w := range append(ws, write{Key: keySeq, Value: seqValue(seq)}, write{Key: keyFormatSeq, Value: seqValue(seq)}) {
		err := apply(w)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("%w: commit part: %w", ErrStore, err)
			}
			txn = db.NewTransaction(true)
			err = apply(w)
		}
		if err != nil {
			return fmt.Errorf("%w: write: %w", ErrStore, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %w", ErrStore, err)
	}
	return nil
}

// readToolDefs reads the stored definitions of a server's tools.
func readToolDefs(db *badger.DB, server string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	err := db.View(func(txn *badger.Txn) error {
		p := toolPrefix(server)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var r toolRec
			if err := it.Item().Value(func(v []byte) (err error) { r, err = decodeToolRec(v); return err }); err != nil {
				return err
			}
			out[string(it.Item().Key()[len(p):])] = r.Def
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: read tools of %q: %w", ErrStore, server, err)
	}
	return out, nil
}

// readTool reads one stored tool definition.
func readTool(txn *badger.Txn, server, tool string) (json.RawMessage, error) {
	it, err := txn.Get(toolKey(server, tool))
	if err != nil {
		return nil, err
	}
	var r toolRec
	if err := it.Value(func(v []byte) (err error) { r, err = decodeToolRec(v); return err }); err != nil {
		return nil, err
	}
	return r.Def, nil
}

// digest hashes every key and value of the store except the position keys (m/): replicas that
// applied the same stream hold the same digest.
func digest(db *badger.DB) (string, error) {
	h := sha256.New()
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if bytes.HasPrefix(k, []byte(pfxMeta)) || bytes.HasPrefix(k, []byte(pfxVector)) {
				continue // position and derived data: not content
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			binary.Write(h, binary.BigEndian, uint32(len(k)))
			h.Write(k)
			binary.Write(h, binary.BigEndian, uint32(len(v)))
			h.Write(v)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%w: digest: %w", ErrStore, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// badgerLog routes Badger's log to zerolog: errors and warnings only. A failed memtable flush
// (which Badger retries for ever, logging each failure) is also signaled on flushFailed.
type badgerLog struct {
	l           zerolog.Logger
	flushFailed chan<- struct{}
}

// badgerFlushFailed starts the message Badger logs each time it fails to write a memtable to
// a table (its errors wrap nothing to test).
const badgerFlushFailed = "error flushing memtable to disk"

func (b badgerLog) Errorf(f string, a ...any) {
	b.l.Error().Str("component", "badger").Msgf(f, a...)
	if b.flushFailed != nil && strings.HasPrefix(f, badgerFlushFailed) {
		select {
		case b.flushFailed <- struct{}{}:
		default:
		}
	}
}
func (b badgerLog) Warningf(f string, a ...any) { b.l.Warn().Str("component", "badger").Msgf(f, a...) }
func (b badgerLog) Infof(string, ...any)        {}
func (b badgerLog) Debugf(string, ...any)       {}
