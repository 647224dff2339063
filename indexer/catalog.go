package indexer

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/jsonscan"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/search"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/suggest"
)

// viewBound bounds the removed tool names the catalog's freshness view remembers a server. The
// view is asked only of the tools the catalog holds (their lists' state: search and details),
// never of one its server no longer lists, whose "removed" comes from the catalog's own records
// (Config.MaxRemoved in all): the bound of other kinds (staleness.MaxRememberedItems), not the
// executor's (staleness.MaxRemembered, 50,000 names of up to 4 KiB a server), whose calls of a
// removed tool the view answers.
const viewBound = staleness.MaxRememberedItems

// Catalog is one indexer replica: the Badger catalog, the search index and freshness view built
// from it, and the queries over them. Follow is its one writer; every query method is safe for
// concurrent use.
type Catalog struct {
	cfg Config
	log zerolog.Logger
	db  *badger.DB
	pol *policy.Policy

	mu       sync.RWMutex // guards the maps, index and view together
	servers  map[string]*serverMem
	byPublic map[string]*entry
	removed  map[string]removedRec
	index    *search.Index
	view     *staleness.View

	seq        atomic.Uint64
	streamLast atomic.Uint64 // the registry stream's last sequence, as last seen (follow, watchOrigin)
	// through is a sequence through which the replica took every message the stream still
	// held (follow: the stream's last sequence at its start, once nothing is pending after
	// the replica's position): messages deleted before the replica read them (confirmations
	// whose TTL ran out) are no lag.
	through atomic.Uint64
	// noFirst: the catalog's origin (keyFirst) is not recorded yet: it is empty, or applied
	// only confirmations since (see applyMsg). Follow's goroutine only, and Open.
	noFirst    bool
	ready      atomic.Bool
	applied    atomic.Uint64
	badEvents  atomic.Uint64
	collisions atomic.Uint64
	badItems   atomic.Uint64

	// Hybrid search (Config.Embedder): tools waiting for a vector (guarded by mu), the
	// vectorizer's wake-up, and counters.
	vecWant    map[string]vecWant
	vecRefused map[string]vecWant // texts the endpoint refused, asked again at their retry time
	vecKick    chan struct{}
	vecProbed  bool // the vector space was checked (see probeSpace); the vectorizer's own
	// space is the probe's vector in the space of the vectors attached (nil until the first
	// probe): every response's probe vector is checked against it (see embedInSpace).
	space atomic.Pointer[[]float32]
	// spaceCheck asks the vectorizer to probe again: a request's response was of another space.
	spaceCheck  atomic.Bool
	queryVecs   vecCache
	embedErrors atomic.Uint64
	// embedDown holds off request embeddings after a failure, for at least embedRetryMin
	// (a field: tests shorten it).
	embedDown     breaker
	embedRetryMin time.Duration
	// embedWaits holds a token per search waiting for its query's embedding: at most half
	// the service's workers wait on the endpoint, the others serve (lexically, details,
	// servers) whatever the endpoint does.
	embedWaits chan struct{}
	// refusedRetry is the first hold-off of a refused tool text (refusedRetryMin; a field:
	// tests shorten it).
	refusedRetry time.Duration
	badVectors   atomic.Uint64
	// vecGen counts the changes of tools' texts (upsertDoc; guarded by mu): a sweep of the
	// vector cache checks its stale keys again when it moved. vecWritten counts the vectors
	// cached since the last sweep (the vectorizer's own; see maybeSweepVectors).
	vecGen     uint64
	vecWritten int

	applying uint64    // stream sequence of the message being planned (Follow only)
	applyNow time.Time // the clock when it came: a listedAt ahead of it is taken as it (notAhead)
	nextOrd  int       // next serverMem.ord
	version  uint64    // applied changes of the in-memory state (guarded by mu)
	overview atomic.Pointer[overview]
	scopes   atomic.Pointer[scopeOverview]
	// serverSet changes whenever a server is added to servers (or servers is replaced); names
	// caches the sorted names of one state of it (servers pages). Guarded by mu.
	serverSet uint64
	names     atomic.Pointer[serverNames]
	// noFastPath makes every search check each candidate (tests compare both paths).
	noFastPath bool
	following  atomic.Bool
	closeOnce  sync.Once
	// storeMu is held (read) by every write to the store, and (write) by each step of a value
	// log GC pass (see gcValueLog), by DropAll and by Close; gcClosed (guarded by it) refuses
	// GC passes after Close. Lock order: storeMu before mu, and never taken while holding mu
	// (a query would otherwise wait for a GC step, behind a writer waiting for mu).
	storeMu      sync.RWMutex
	gcClosed     bool
	vlogRewrites atomic.Uint64
	// flushFailed receives (without blocking: a full channel drops it) each failure of Badger
	// to write a memtable to a table, which it retries once a second for ever (see Close).
	flushFailed chan struct{}
	// served counts the catalog service's requests per endpoint (fixed keys, set at Open).
	served map[string]*endpointCounters
}

// endpointCounters count one endpoint's requests.
type endpointCounters struct {
	requests, errors atomic.Uint64
	nanos            atomic.Int64
}

// entry is one tool in memory: what search, labels and policy need. Schemas stay in Badger.
type entry struct {
	srv                  *serverMem
	public, server, tool string
	title, line          string
	hints                Hints
	hash                 [16]byte // of the raw definition
	klen                 int      // len(suggest.Key(tool)): see serverMem.sorted
	// vkey is the vector cache key of the tool's text (with Config.Embedder: see upsertDoc),
	// which a sweep of the cache keeps.
	vkey [32]byte
}

// serverMem is one server in memory.
type serverMem struct {
	ord int // index of the server's slot in per-request scratch (visibility)
	// verdict caches the freshness verdict shared by the server's tools (see uniformVerdict).
	verdict atomic.Pointer[cachedVerdict]
	rec     serverRec
	kinds   map[subjects.Kind]*kindRec // set with setKind
	// tools0 is kinds[tools], kept beside the map for the search hot path.
	tools0 *kindRec
	tools  map[string]*entry // by original name
	// sorted holds the entries of tools ordered by bySuggestKey, for the suggestions of a
	// details request (see Catalog.suggestions): an order that is the same on every replica
	// whatever the order tools were added in, kept up to date by resort on every change of tools.
	sorted []*entry
}

// bySuggestKey orders the tools of a server by the lengths of their names' keys
// (suggest.Key), then by name: the tools whose keys are near a length are one run.
func bySuggestKey(a, b *entry) int {
	if a.klen != b.klen {
		return cmp.Compare(a.klen, b.klen)
	}
	return strings.Compare(a.tool, b.tool)
}

// resort brings s.sorted up to date with s.tools after entries were removed from it, replaced
// in it or added to it (added: the entries put in it since the last resort, in any order). It
// costs O(len(s.tools) + len(added)·log len(added)). Callers hold c.mu (write).
func (s *serverMem) resort(added []*entry) {
	slices.SortFunc(added, bySuggestKey)
	out := make([]*entry, 0, len(s.tools))
	i := 0
	for _, e := range s.sorted {
		if s.tools[e.tool] != e {
			continue // removed or replaced
		}
		for i < len(added) && bySuggestKey(added[i], e) < 0 {
			out = append(out, added[i])
			i++
		}
		out = append(out, e)
	}
	s.sorted = append(out, added[i:]...)
}

// Open opens (or creates) a replica's catalog and rebuilds its in-memory state from it. It
// does not touch NATS: call Follow to catch up with the stream and Serve to answer requests.
func Open(cfg Config) (*Catalog, error) {
	if cfg.Policy == nil {
		cfg.Policy = policy.Open()
	}
	if cfg.MaxRemoved <= 0 {
		cfg.MaxRemoved = DefaultMaxRemoved
	}
	if cfg.Replica == "" {
		cfg.Replica = "0"
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = host + ":" + strconv.Itoa(os.Getpid()) + "/" + cfg.Replica
	}
	if cfg.Stream == "" {
		cfg.Stream = subjects.RegistryStream
	}
	log := cfg.Log.With().Str("role", "indexer").Str("replica", cfg.Replica).Logger()
	flushFailed := make(chan struct{}, 1)
	db, err := openBadger(cfg, log, flushFailed)
	if err != nil {
		return nil, err
	}
	c := &Catalog{cfg: cfg, log: log, db: db, pol: cfg.Policy, vecKick: make(chan struct{}, 1), embedRetryMin: embedRetryMin, refusedRetry: refusedRetryMin,
		flushFailed: flushFailed,
		embedWaits:  make(chan struct{}, max(1, cfg.workers()/2)),
		served:      map[string]*endpointCounters{"search": {}, "details": {}, "servers": {}}}
	c.reset()
	if err := c.load(); err != nil {
		db.Close()
		// Not served in part, and not dropped here either: the operator sees why, and the
		// remedy (the catalog is derived from the stream).
		return nil, unreadable(cfg.Dir, err)
	}
	if err := c.sweepVectors(); err != nil {
		db.Close()
		return nil, storeError("sweep vectors", err) // (c.room refuses with ErrStore)
	}
	c.noFirst = c.Seq() == 0 // else recorded, or checkOrigin records it
	return c, nil
}

func (c *Catalog) reset() {
	c.servers = map[string]*serverMem{}
	c.byPublic = map[string]*entry{}
	c.removed = map[string]removedRec{}
	c.vecWant = map[string]vecWant{}
	c.vecRefused = map[string]vecWant{}
	c.index = search.New(c.cfg.Search)
	// Asked only of the tools the catalog holds (see viewBound).
	c.view = staleness.NewRemembering(c.cfg.Now, viewBound)
	c.nextOrd = 0
	c.version++
	c.serverSet++
	// Before seq (Stats reads seq first): what the replica took through a sequence of the
	// stream it dropped the catalog of says nothing of the messages it replays now.
	c.through.Store(0)
	c.seq.Store(0)
	c.noFirst = true
}

// Close closes the store. Follow and Serve must have returned (cancel their context first).
func (c *Catalog) Close() error {
	var err error
	c.closeOnce.Do(func() {
		// A GC step in flight ends first (Follow has returned: its pass stops after the file
		// it is rewriting); none starts after.
		c.storeMu.Lock()
		c.gcClosed = true
		c.storeMu.Unlock()
		// Badger's Close writes its memtable to a table, and retries a failed write once a
		// second for ever (a directory made read-only, no descriptor left, an I/O error): the
		// role waiting for it never reported why the replica stopped, nor did the process
		// exit. Given up after a few failures: the memtable's writes are in Badger's
		// write-ahead log, replayed at the next start.
		done := make(chan error, 1)
		go func() { done <- c.db.Close() }()
		for fails := 0; ; {
			select {
			case e := <-done:
				if e != nil {
					err = fmt.Errorf("%w: close: %w", ErrStore, e)
				}
				return
			case <-c.flushFailed:
				if fails++; fails >= closeFlushTries {
					err = fmt.Errorf("%w: close: the store cannot write its memtable to %s (Badger failed %d times; its errors are logged), given up: what it holds is in its write-ahead log, replayed at the next start once the directory can be written",
						ErrStore, c.cfg.Dir, fails)
					return
				}
			}
		}
	})
	return err
}

// closeFlushTries is how many failures of Badger to write its memtable Close waits for.
const closeFlushTries = 3

// Seq returns the last applied stream sequence.
func (c *Catalog) Seq() uint64 { return c.seq.Load() }

// Ready reports whether the replica has caught up with the stream as it was when Follow
// started (and serves answers that reflect it).
func (c *Catalog) Ready() bool { return c.ready.Load() }

// Stats returns the replica's counters.
func (c *Catalog) Stats() Stats {
	c.mu.RLock()
	n := 0
	for _, s := range c.servers {
		if !s.gone() && s.announced() {
			n++
		}
	}
	tools := len(c.byPublic)
	pending := len(c.vecWant)
	vectors, _ := c.index.Vectors() // under c.mu: a rebuild replaces the index
	c.mu.RUnlock()
	endpoints := make(map[string]EndpointStats, len(c.served))
	for name, ec := range c.served {
		endpoints[name] = EndpointStats{Requests: ec.requests.Load(), Errors: ec.errors.Load(),
			Seconds: float64(ec.nanos.Load()) / 1e9}
	}
	seq, last, lag := c.position()
	return Stats{
		Seq: seq, StreamLast: last, Lag: lag, Applied: c.applied.Load(), BadEvents: c.badEvents.Load(),
		Collisions: c.collisions.Load(), BadItems: c.badItems.Load(), Tools: tools, Servers: n,
		Vectors: vectors, VectorsPending: pending, EmbedErrors: c.embedErrors.Load(), BadVectors: c.badVectors.Load(),
		Endpoints: endpoints, ValueLogBytes: vlogBytes(c.cfg.Dir), ValueLogRewrites: c.vlogRewrites.Load(),
	}
}

// position returns the replica's last applied sequence, the stream's last sequence as last
// seen, and the lag (see Stats.Lag).
func (c *Catalog) position() (seq, last, lag uint64) {
	seq, last = c.Seq(), c.streamLast.Load()
	return seq, last, last - min(max(seq, c.through.Load()), last)
}

// Digest hashes the stored catalog (not the position): replicas that applied the same stream
// prefix have the same digest, and so does a replica rebuilt by replay.
func (c *Catalog) Digest() (string, error) { return digest(c.db) }

// Lookup maps a public name back to the exact server and original tool name.
func (c *Catalog) Lookup(public string) (server, tool string, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.byPublic[public]
	if e == nil {
		return "", "", false
	}
	return e.server, e.tool, true
}

// setKind sets (r != nil) or deletes the metadata of one kind.
func (s *serverMem) setKind(k subjects.Kind, r *kindRec) {
	if r == nil {
		delete(s.kinds, k)
	} else {
		s.kinds[k] = r
	}
	if k == subjects.KindTools {
		s.tools0 = r
	}
}

func (s *serverMem) gone() bool {
	return s.rec.Status != nil && s.rec.Status.Status == subjects.StatusRemoved
}

// announced reports whether the registry announced the server: a status, a list or a tool. A
// server known only from an operator's revocation (kept for when it comes), and maybe a
// list_changed since, is no server to list or count.
func (s *serverMem) announced() bool {
	if s.rec.Status != nil || len(s.tools) > 0 {
		return true
	}
	for _, km := range s.kinds {
		if km.Listed {
			return true
		}
	}
	return false
}

func (c *Catalog) server(name string) *serverMem {
	s := c.servers[name]
	if s == nil {
		s = &serverMem{ord: c.nextOrd, kinds: map[subjects.Kind]*kindRec{}, tools: map[string]*entry{}}
		c.nextOrd++
		c.serverSet++
		c.servers[name] = s
	}
	return s
}

func defHash(raw []byte) [16]byte {
	sum := sha256.Sum256(raw)
	return [16]byte(sum[:16])
}

func newEntry(s *serverMem, public, server string, d toolDef, raw []byte) *entry {
	return &entry{
		srv: s, public: public, server: server, tool: d.Name,
		// Clones: a substring would keep the whole decoded description (or message) alive.
		title: strings.Clone(d.Title), line: strings.Clone(oneLine(d.Description)), hints: d.Hints, hash: defHash(raw),
		klen: len(suggest.Key(d.Name)),
	}
}

// load rebuilds the in-memory state from Badger.
func (c *Catalog) load() error {
	// A catalog of another format (an older mcpstream's, or a newer one's after a downgrade)
	// is dropped and rebuilt when Follow starts (checkOrigin): only its position is read, not
	// records this version may not understand (one it cannot decode would fail Open).
	format, formatSeq, err := c.readFormat()
	if err != nil {
		return fmt.Errorf("%w: load: read format: %w", ErrStore, err)
	}
	if err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(keySeq)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := it.ValueCopy(nil)
		if err != nil {
			return err
		}
		return c.loadKey(string(keySeq), v)
	}); err != nil {
		return fmt.Errorf("%w: load: %w", ErrStore, err)
	}
	if seq := c.Seq(); seq > 0 {
		if why := formatProblem(format, formatSeq, seq); why != "" {
			c.log.Warn().Str("why", why).Uint64("seq", seq).
				Msg("catalog not read: it is dropped and rebuilt by replay when the replica follows the registry stream")
			return nil
		}
	}
	err = c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := string(item.Key())
			if strings.HasPrefix(k, pfxVector) {
				continue // the vector cache: read by the vectorizer
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := c.loadKey(k, v); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: load: %w", ErrStore, err)
	}
	// Order each server's tools for suggestions (serverMem.sorted), and rebuild the freshness
	// view from what the stored state says, through its public Apply.
	for _, name := range sortedKeys(c.servers) {
		s := c.servers[name]
		added := make([]*entry, 0, len(s.tools))
		for _, e := range s.tools {
			added = append(added, e)
		}
		s.resort(added)
		for _, ev := range viewEvents(name, c.servers[name]) {
			c.view.Apply(ev)
		}
	}
	return nil
}

func (c *Catalog) loadKey(k string, v []byte) error {
	switch {
	case k == string(keySeq):
		if len(v) != 8 {
			return errors.New("bad sequence value")
		}
		c.seq.Store(uint64(v[0])<<56 | uint64(v[1])<<48 | uint64(v[2])<<40 | uint64(v[3])<<32 |
			uint64(v[4])<<24 | uint64(v[5])<<16 | uint64(v[6])<<8 | uint64(v[7]))
	case strings.HasPrefix(k, pfxApplied):
		// After the k/ keys (m/ sorts after k/): the record it belongs to is loaded.
		srv, kind, ok := splitLP([]byte(k[len(pfxApplied):]))
		if !ok {
			return errors.New("bad applied listedAt key")
		}
		var at time.Time
		if err := at.UnmarshalText(v); err != nil {
			return err
		}
		if s := c.servers[srv]; s != nil && s.kinds[subjects.Kind(kind)] != nil {
			s.kinds[subjects.Kind(kind)].applied = at
		}
	case len(k) > 2 && k[:2] == pfxServer:
		return json.Unmarshal(v, &c.server(k[2:]).rec)
	case len(k) > 2 && k[:2] == pfxKind:
		srv, kind, ok := splitLP([]byte(k[2:]))
		if !ok {
			return errors.New("bad kind key")
		}
		var r kindRec
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		c.server(srv).setKind(subjects.Kind(kind), &r)
	case len(k) > 2 && k[:2] == pfxRemoved:
		var r removedRec
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		c.removed[k[2:]] = r
	case len(k) > 2 && k[:2] == pfxTool:
		srv, tool, ok := splitLP([]byte(k[2:]))
		if !ok {
			return errors.New("bad tool key")
		}
		r, err := decodeToolRec(v)
		if err != nil {
			return err
		}
		d := parseDef(r.Def)
		d.Name = tool
		s := c.server(srv)
		e := newEntry(s, r.Public, srv, d, r.Def)
		s.tools[tool] = e
		c.byPublic[r.Public] = e
		c.upsertDoc(searchDoc(r.Public, srv, s.rec.Description, d))
	}
	return nil
}

// viewEvents are the registry events that bring an empty freshness view to the stored state of
// one server.
func viewEvents(name string, s *serverMem) []subjects.RegistryEvent {
	var evs []subjects.RegistryEvent
	if s.rec.Status != nil {
		evs = append(evs, subjects.RegistryEvent{Status: s.rec.Status})
	}
	for _, k := range subjects.Kinds {
		km := s.kinds[k]
		if km == nil {
			continue
		}
		if km.Listed {
			sn := &subjects.Snapshot{
				V: subjects.Version, Type: subjects.EventSnapshot, Server: name, Kind: k,
				Fingerprint: km.Fingerprint, ListedAt: km.appliedAt(), Pages: km.Pages, TTLMs: km.TTLMs,
				CacheScope: km.CacheScope, AuthContext: km.AuthContext,
			}
			names := km.Names
			if k == subjects.KindTools {
				names = sortedKeys(s.tools)
			}
			for _, n := range names {
				raw, _ := json.Marshal(map[string]string{itemKey(k): n})
				sn.Items = append(sn.Items, raw)
			}
			evs = append(evs, subjects.RegistryEvent{Snapshot: sn})
		}
		if km.Stale {
			evs = append(evs, subjects.RegistryEvent{Seq: km.StaleSeq, ListChanged: &subjects.ListChanged{
				V: subjects.Version, Type: subjects.EventChanged, Server: name, Kind: k}})
		}
	}
	if len(s.rec.Revoked) > 0 || s.rec.AllRevoked {
		r := &subjects.Revocation{V: subjects.Version, Type: subjects.EventRevoked, Server: name,
			Tools: slices.Clone(s.rec.Revoked)}
		if s.rec.AllRevoked {
			r.Tools = append(r.Tools, "*")
		}
		evs = append(evs, subjects.RegistryEvent{Revocation: r})
	}
	return evs
}

func itemKey(k subjects.Kind) string {
	if k == subjects.KindResources {
		return "uri"
	}
	return "name"
}

// maxServerNameBytes is the longest server name the catalog stores: its records' keys hold the
// name, with a tool's (up to MaxToolNameBytes), and a Badger key may not exceed 65,000 bytes.
// Only a nats-server whose max_control_line was raised takes a subject that long.
const maxServerNameBytes = 60_000

// decodeEvent decodes a registry message and checks that its payload matches its subject (a
// payload naming another server than its subject is refused: NATS permissions pin subjects),
// and that its server's name fits the catalog's keys: a commit of a longer one would fail, and
// the replica stop at that message at every start.
func decodeEvent(subject string, data []byte) (subjects.RegistryEvent, error) {
	ev, err := subjects.DecodeRegistryMsg(subject, data)
	if err != nil || len(subject) <= maxServerNameBytes {
		return ev, err
	}
	if sub, err := subjects.ParseRegistry(subject); err == nil && len(sub.Server) > maxServerNameBytes {
		return subjects.RegistryEvent{}, fmt.Errorf("server name of %d bytes, more than the catalog stores (%d)", len(sub.Server), maxServerNameBytes)
	}
	return ev, nil
}

// applyMsg applies one stream message: Badger first (with the sequence, atomically), then the
// in-memory state. A malformed message only advances the sequence.
func (c *Catalog) applyMsg(seq uint64, subject string, data []byte) error {
	var first []write
	if c.Seq() == 0 {
		// The first message of an empty catalog: see load (the format).
		first = []write{{Key: keyFormat, Value: []byte(catalogFormat)}}
	}
	recordFirst := false
	if c.noFirst {
		// The origin (see checkOrigin) is the first message that is not a confirmation: one
		// applied to a catalog that holds no snapshot changes nothing, and registrysync stores
		// most with a per-message TTL, so the stream's first sequence moves past them without
		// a purge.
		if sub, err := subjects.ParseRegistry(subject); err != nil || sub.Event != subjects.EventConfirmed {
			first = append(first, write{Key: keyFirst, Value: seqValue(seq)})
			recordFirst = true
		}
	}
	defer func() {
		if recordFirst && c.Seq() == seq {
			c.noFirst = false
		}
	}()
	ev, err := decodeEvent(subject, data)
	if err != nil {
		c.badEvents.Add(1)
		c.log.Warn().Uint64("seq", seq).Str("subject", subject).Err(err).Msg("skipping malformed registry message")
		if err := c.commit(first, seq); err != nil {
			return err
		}
		c.seq.Store(seq)
		return nil
	}
	c.applying = seq
	c.applyNow = c.now()
	ev.Seq = seq
	ws, mem, err := c.plan(ev)
	if err != nil {
		return err
	}
	ws, mem = c.forgetRemoved(ws, mem)
	if err := c.commit(append(ws, first...), seq); err != nil {
		return err
	}
	c.mu.Lock()
	if mem != nil {
		mem()
	}
	c.view.Apply(c.viewEvent(ev))
	c.version++
	c.mu.Unlock()
	c.seq.Store(seq)
	c.applied.Add(1)
	return nil
}

// notAhead is t, or the time the message being applied came (applyNow) when t is later: the
// listedAt the freshness view applies (staleness.View takes one ahead of its clock as now).
func (c *Catalog) notAhead(t time.Time) time.Time {
	if t.After(c.applyNow) {
		return c.applyNow
	}
	return t
}

// viewEvent is ev as the freshness view is given it: a listedAt ahead of the clock already
// taken as applyNow, the time that plan stored (see kindRec.applied), so that the view rebuilt
// from the store after a restart holds what this one holds.
func (c *Catalog) viewEvent(ev subjects.RegistryEvent) subjects.RegistryEvent {
	switch {
	case ev.Snapshot != nil && ev.Snapshot.ListedAt.After(c.applyNow):
		sn := *ev.Snapshot
		sn.ListedAt = c.applyNow
		ev.Snapshot = &sn
	case ev.Confirmed != nil && ev.Confirmed.ListedAt.After(c.applyNow):
		cf := *ev.Confirmed
		cf.ListedAt = c.applyNow
		ev.Confirmed = &cf
	}
	return ev
}

// setApplied sets km.applied to at (the listedAt the view applies) unless it is km.ListedAt,
// and returns the write that stores it, or deletes the one stored for old.
func setApplied(server string, kind subjects.Kind, old, km *kindRec, at time.Time) []write {
	km.applied = time.Time{}
	if !at.Equal(km.ListedAt) {
		km.applied = at
	}
	switch {
	case !km.applied.IsZero():
		b, _ := km.applied.UTC().MarshalText() // a time in years 0..9999: always marshals
		return []write{{Key: appliedKey(server, kind), Value: b}}
	case old != nil && !old.applied.IsZero():
		return []write{{Key: appliedKey(server, kind)}}
	}
	return nil
}

// forgetRemoved adds to one message's writes the deletion of the oldest removed-tool records
// when the message would take their number past Config.MaxRemoved (down to 15/16 of it, so the
// sort is rare), and to its in-memory change their removal. The order (removal sequence, then
// public name) is the same in every replica.
func (c *Catalog) forgetRemoved(ws []write, mem func()) ([]write, func()) {
	touched := map[string]bool{} // removed records this message writes or deletes
	n := len(c.removed)
	for _, w := range ws {
		pub, ok := strings.CutPrefix(string(w.Key), pfxRemoved)
		if !ok {
			continue
		}
		touched[pub] = true
		_, had := c.removed[pub]
		switch {
		case w.Value != nil && !had:
			n++
		case w.Value == nil && had:
			n--
		}
	}
	limit := c.cfg.MaxRemoved
	if n <= limit {
		return ws, mem
	}
	type old struct {
		pub string
		seq uint64
	}
	cands := make([]old, 0, len(c.removed))
	for pub, r := range c.removed {
		// A record of this very message is one of its own removals too: stored already by
		// a first part of its split commit that a crash cut (see commit), it is kept as the
		// message applied whole keeps it.
		if !touched[pub] && r.Seq != c.applying {
			cands = append(cands, old{pub, r.Seq})
		}
	}
	slices.SortFunc(cands, func(a, b old) int {
		if a.seq != b.seq {
			return cmp.Compare(a.seq, b.seq)
		}
		return strings.Compare(a.pub, b.pub)
	})
	drop := min(len(cands), n-(limit-limit/16))
	gone := make([]string, drop)
	for i := range drop {
		gone[i] = cands[i].pub
		ws = append(ws, write{Key: removedKey(cands[i].pub)})
	}
	c.log.Debug().Int("forgotten", drop).Int("limit", limit).Msg("forgetting the oldest removed tools")
	return ws, func() {
		if mem != nil {
			mem()
		}
		for _, pub := range gone {
			delete(c.removed, pub)
		}
	}
}

// plan computes the Badger writes of one event and the in-memory change that goes with them.
// It only reads the in-memory state (Follow is the one writer, so no lock is needed).
func (c *Catalog) plan(ev subjects.RegistryEvent) ([]write, func(), error) {
	switch {
	case ev.Snapshot != nil && ev.Snapshot.Kind == subjects.KindTools:
		return c.planTools(ev.Snapshot)
	case ev.Snapshot != nil:
		return c.planOtherKind(ev.Snapshot)
	case ev.ListChanged != nil:
		lc := ev.ListChanged
		s := c.servers[lc.Server]
		if s == nil {
			// A server the registry never announced (no status, no list): nothing of it is
			// listed, so nothing turns stale, and no phantom server appears in servers.
			return nil, nil, nil
		}
		km := kindRec{Count: 0}
		if s.kinds[lc.Kind] != nil {
			km = *s.kinds[lc.Kind]
		}
		if !km.Stale || km.StaleSeq != 0 {
			km.StaleSeq = max(km.StaleSeq, ev.Seq) // as the freshness view counts it
		}
		km.Stale = true
		return []write{putJSON(kindKey(lc.Server, lc.Kind), km)}, func() {
			c.server(lc.Server).setKind(lc.Kind, &km)
		}, nil
	case ev.Status != nil:
		return c.planStatus(ev.Status)
	case ev.Revocation != nil:
		return c.planRevocation(ev.Revocation)
	case ev.Confirmed != nil:
		return c.planConfirmed(ev.Confirmed)
	}
	return nil, nil, nil
}

// planConfirmed restarts the TTL of the list a Confirmed event names: its stored listedAt moves
// to the confirmation's, so that a restarted replica (whose freshness view is rebuilt from the
// stored metadata) and a replica rebuilt by replay hold the same. As in the freshness view
// (staleness.View.Confirm), a confirmation of another fingerprint, or not newer than the
// listedAt held, restarts nothing. A list_changed flag stays set unless the confirmation answers
// it (staleness.Answers: the fingerprint held, and an afterSeq at least the flag's StaleSeq).
func (c *Catalog) planConfirmed(cf *subjects.Confirmed) ([]write, func(), error) {
	s := c.servers[cf.Server]
	if s == nil {
		return nil, nil, nil
	}
	old := s.kinds[cf.Kind]
	if old == nil || !old.Listed || old.Fingerprint != cf.Fingerprint {
		return nil, nil, nil
	}
	km := *old
	if km.Stale && staleness.Answers(cf, km.Fingerprint, km.StaleSeq) {
		km.Stale, km.StaleSeq = false, 0
	}
	if cf.ListedAt.After(km.ListedAt) {
		km.ListedAt = cf.ListedAt
	}
	// The view's listedAt moves as staleness.View.Confirm moves it: to the confirmation's,
	// taken as now when ahead, unless that is before the one it holds.
	at := old.appliedAt()
	if cat := c.notAhead(cf.ListedAt); !cat.Before(at) {
		at = cat
	}
	aw := setApplied(cf.Server, cf.Kind, old, &km, at)
	if km.Stale == old.Stale && km.ListedAt.Equal(old.ListedAt) && km.applied.Equal(old.applied) {
		return nil, nil, nil
	}
	return append([]write{putJSON(kindKey(cf.Server, cf.Kind), km)}, aw...), func() {
		c.server(cf.Server).setKind(cf.Kind, &km)
	}, nil
}

func (c *Catalog) curRec(server string) serverRec {
	if s := c.servers[server]; s != nil {
		return s.rec
	}
	return serverRec{}
}

type upsert struct {
	e   *entry
	doc search.Doc
}

func (c *Catalog) planTools(sn *subjects.Snapshot) ([]write, func(), error) {
	server := sn.Server
	old := c.servers[server]
	rec := c.curRec(server)
	if sn.Info != nil {
		rec.Info = sn.Info
		if sn.Info.Description != "" {
			rec.Description = sn.Info.Description
		}
	}
	descChanged := old == nil || rec.Description != old.rec.Description
	km := &kindRec{
		Fingerprint: sn.Fingerprint, ListedAt: sn.ListedAt, Pages: sn.Pages, TTLMs: sn.TTLMs,
		CacheScope: sn.CacheScope, AuthContext: sn.AuthContext, Listed: true,
	}
	var ws []write
	// Items are parsed, and changed ones prepared (record, search document), on every core: a
	// replay applies large snapshots back to back. Decisions stay sequential, in item order.
	type item struct {
		d        toolDef
		pub      string
		h        [16]byte
		write    bool // store the record
		index    bool // (re)index the tool
		rec      []byte
		up       upsert
		skipped  bool
		tooLarge bool   // over MaxDefinitionBytes (not parsed)
		longName string // the start of a name over MaxToolNameBytes
	}
	items := make([]item, len(sn.Items))
	parallelFor(len(items), func(i int) {
		raw := sn.Items[i]
		it := &items[i]
		if len(raw) > MaxDefinitionBytes {
			it.tooLarge = true
			return
		}
		it.d = parseDef(raw)
		if len(it.d.Name) > MaxToolNameBytes {
			// Past a Badger key's limit, its writes would fail the whole message (and the
			// replica, on every restart): skipped like a definition without a name.
			it.longName = cutText(it.d.Name, maxRejectedText)
			it.d = toolDef{}
		}
		if it.d.Name != "" {
			it.pub = subjects.PublicName(server, it.d.Name)
			it.h = defHash(raw)
		}
	})
	// What registrysync left out first, then what the catalog leaves out, in item order.
	var rej rejections
	rej.addListed(sn.Rejected)
	seen := map[string]bool{}
	seenPub := map[string]bool{}
	// A message of 8 MB holds millions of unusable items ("0,"): a few are logged, then one
	// line counts the others (all are counted in Stats.BadItems and the list's rejections).
	skippedLogged := 0
	defer func() {
		if skippedLogged > maxSkipLogs {
			c.log.Warn().Str("server", server).Int("skipped", skippedLogged).Int("logged", maxSkipLogs).
				Msg("skipped more tool definitions without a usable name, listed twice, or too large than are logged one by one")
		}
	}()
	for i := range items {
		it := &items[i]
		if it.d.Name == "" || seen[it.d.Name] {
			c.badItems.Add(1)
			it.skipped = true
			switch {
			case it.tooLarge:
				rej.add(itemName(sn.Items[i]), subjects.CodeDefinitionTooLarge,
					fmt.Sprintf("definition is %d bytes, more than the %d the catalog keeps", len(sn.Items[i]), MaxDefinitionBytes))
			case it.longName != "":
				rej.add(it.longName, subjects.CodeInvalidDefinition, fmt.Sprintf("name is more than %d bytes long", MaxToolNameBytes))
			case it.d.Name == "":
				rej.add("", subjects.CodeInvalidDefinition, "a tool needs a non-empty string name")
			default:
				rej.add(it.d.Name, subjects.CodeDuplicateName, "a tool with this name was listed before; the first one is kept")
			}
			if skippedLogged++; skippedLogged <= maxSkipLogs {
				c.log.Warn().Str("server", server).Int("item", i).Str("name", cutText(it.d.Name, maxRejectedText)).Int("bytes", len(sn.Items[i])).
					Msg("skipping a tool definition without a usable name, listed twice, or too large")
			}
			continue
		}
		if other := c.byPublic[it.pub]; other != nil && (other.server != server || other.tool != it.d.Name) || seenPub[it.pub] {
			c.collisions.Add(1)
			it.skipped = true
			holder := ""
			if other != nil {
				holder = other.server + "/" + other.tool
			}
			c.log.Error().Str("server", server).Str("tool", it.d.Name).Str("public", it.pub).Str("holder", holder).
				Msg("public name collision: refusing the tool rather than shadowing the one that holds the name")
			// Not who holds it: that tool may be one the reader of the servers listing may
			// not see.
			rej.add(it.d.Name, subjects.CodeNameCollision, fmt.Sprintf("its public name %s is held by another tool", it.pub))
			continue
		}
		seen[it.d.Name], seenPub[it.pub] = true, true
		var prev *entry
		if old != nil {
			prev = old.tools[it.d.Name]
		}
		it.write = prev == nil || prev.hash != it.h
		it.index = it.write || descChanged
	}
	parallelFor(len(items), func(i int) {
		it := &items[i]
		if it.skipped {
			return
		}
		raw := sn.Items[i]
		if it.write {
			it.rec = toolRec{Public: it.pub, Def: raw}.encode()
		}
		if it.index {
			it.up = upsert{newEntry(nil, it.pub, server, it.d, raw), searchDoc(it.pub, server, rec.Description, it.d)}
		}
	})
	var ups []upsert
	var restored []string // listed again: their removed records go
	for i := range items {
		it := &items[i]
		if it.skipped {
			continue
		}
		if it.write {
			ws = append(ws, write{Key: toolKey(server, it.d.Name), Value: it.rec})
		}
		// Whether or not the tool is written: after a crash inside a split commit (see
		// commit), the tool may be stored already and its removed record not deleted yet.
		if _, was := c.removed[it.pub]; was {
			ws = append(ws, write{Key: removedKey(it.pub)})
			restored = append(restored, it.pub)
		}
		if it.index {
			ups = append(ups, it.up)
		}
	}
	km.Count = len(seen)
	km.Rejected, km.RejectedMore = rej.recs, rej.more
	var gone []*entry
	var goneRecs []removedRec
	var oldKM *kindRec
	if old != nil {
		oldKM = old.kinds[subjects.KindTools]
		for _, name := range sortedKeys(old.tools) {
			if seen[name] {
				continue
			}
			e := old.tools[name]
			rr := removedRec{Seq: c.applying, Server: server, Tool: name}
			if oldKM != nil {
				rr.CacheScope, rr.AuthContext = oldKM.CacheScope, oldKM.AuthContext
			}
			// The removed record first: a crash between the two (a split commit) leaves the
			// tool stored, so that applying the message again removes it again.
			ws = append(ws, putJSON(removedKey(e.public), rr), write{Key: toolKey(server, name)})
			gone, goneRecs = append(gone, e), append(goneRecs, rr)
		}
	}
	ws = append(ws, putJSON(kindKey(server, subjects.KindTools), km))
	ws = append(ws, setApplied(server, subjects.KindTools, oldKM, km, c.notAhead(sn.ListedAt))...)
	ws = append(ws, putJSON(serverKey(server), rec))
	return ws, func() {
		s := c.server(server)
		s.rec = rec
		s.setKind(subjects.KindTools, km)
		c.removeEntries(s, gone, goneRecs)
		for _, pub := range restored {
			delete(c.removed, pub)
		}
		added := make([]*entry, 0, len(ups))
		for _, u := range ups {
			u.e.srv = s
			s.tools[u.e.tool] = u.e
			c.byPublic[u.e.public] = u.e
			delete(c.removed, u.e.public)
			c.upsertDoc(u.doc)
			added = append(added, u.e)
		}
		if len(gone) > 0 || len(added) > 0 {
			s.resort(added)
		}
	}, nil
}

func (c *Catalog) removeEntries(s *serverMem, gone []*entry, recs []removedRec) {
	for i, e := range gone {
		delete(s.tools, e.tool)
		delete(c.byPublic, e.public)
		c.removeDoc(e.public)
		c.removed[e.public] = recs[i]
	}
}

// redoDocs re-reads a server's tools to re-index them under a new server description.
func (c *Catalog) redoDocs(server, desc string) ([]upsert, error) {
	s := c.servers[server]
	if s == nil || len(s.tools) == 0 {
		return nil, nil
	}
	defs, err := readToolDefs(c.db, server)
	if err != nil {
		return nil, err
	}
	var ups []upsert
	for _, name := range sortedKeys(defs) {
		e := s.tools[name]
		if e == nil {
			continue
		}
		d := parseDef(defs[name])
		d.Name = name
		ups = append(ups, upsert{e, searchDoc(e.public, server, desc, d)})
	}
	return ups, nil
}

func (c *Catalog) planOtherKind(sn *subjects.Snapshot) ([]write, func(), error) {
	rec := c.curRec(sn.Server)
	prevDesc := rec.Description
	if sn.Info != nil {
		rec.Info = sn.Info
		if sn.Info.Description != "" {
			rec.Description = sn.Info.Description
		}
	}
	km := &kindRec{
		Fingerprint: sn.Fingerprint, ListedAt: sn.ListedAt, Pages: sn.Pages, TTLMs: sn.TTLMs,
		CacheScope: sn.CacheScope, AuthContext: sn.AuthContext, Listed: true,
	}
	var rej rejections
	rej.addListed(sn.Rejected)
	seen := map[string]bool{}
	for _, raw := range sn.Items {
		n := staleness.ItemName(sn.Kind, raw)
		if n == "" || seen[n] {
			c.badItems.Add(1)
			if n == "" {
				rej.add(itemName(raw), subjects.CodeInvalidDefinition, fmt.Sprintf("a %s needs a non-empty string %s", singular(sn.Kind), itemKey(sn.Kind)))
			} else {
				rej.add(itemName(raw), subjects.CodeDuplicateName, fmt.Sprintf("a %s with this %s was listed before; the first one is kept", singular(sn.Kind), itemKey(sn.Kind)))
			}
			continue
		}
		seen[n] = true
		km.Names = append(km.Names, n)
	}
	km.Count = len(km.Names)
	km.Rejected, km.RejectedMore = rej.recs, rej.more
	var ups []upsert
	if rec.Description != prevDesc {
		var err error
		if ups, err = c.redoDocs(sn.Server, rec.Description); err != nil {
			return nil, nil, err
		}
	}
	var oldKM *kindRec
	if s := c.servers[sn.Server]; s != nil {
		oldKM = s.kinds[sn.Kind]
	}
	ws := []write{putJSON(kindKey(sn.Server, sn.Kind), km)}
	ws = append(ws, setApplied(sn.Server, sn.Kind, oldKM, km, c.notAhead(sn.ListedAt))...)
	ws = append(ws, putJSON(serverKey(sn.Server), rec))
	return ws, func() {
		s := c.server(sn.Server)
		s.rec = rec
		s.setKind(sn.Kind, km)
		for _, u := range ups {
			c.upsertDoc(u.doc)
		}
	}, nil
}

func (c *Catalog) planStatus(st *subjects.Status) ([]write, func(), error) {
	server := st.Server
	rec := c.curRec(server)
	prevDesc := rec.Description
	rec.Status = st
	if st.Description != "" {
		rec.Description = st.Description
	}
	ws := []write{putJSON(serverKey(server), rec)}
	s := c.servers[server]
	if st.Status == subjects.StatusRemoved {
		// The server and everything it listed leave the catalog; the server record stays (as
		// removed) so the freshness view and "removed" answers survive a restart.
		var gone []*entry
		var recs []removedRec
		if s != nil {
			km := s.kinds[subjects.KindTools]
			for _, name := range sortedKeys(s.tools) {
				e := s.tools[name]
				rr := removedRec{Seq: c.applying, Server: server, Tool: name}
				if km != nil {
					rr.CacheScope, rr.AuthContext = km.CacheScope, km.AuthContext
				}
				// The removed record first (see planTools).
				ws = append(ws, putJSON(removedKey(e.public), rr), write{Key: toolKey(server, name)})
				gone, recs = append(gone, e), append(recs, rr)
			}
			for k, km := range s.kinds {
				ws = append(ws, write{Key: kindKey(server, k)})
				if !km.applied.IsZero() {
					ws = append(ws, write{Key: appliedKey(server, k)})
				}
			}
		}
		return ws, func() {
			s := c.server(server)
			s.rec = rec
			c.removeEntries(s, gone, recs)
			s.resort(nil)
			for _, k := range subjects.Kinds {
				s.setKind(k, nil)
			}
		}, nil
	}
	var ups []upsert
	if rec.Description != prevDesc {
		var err error
		if ups, err = c.redoDocs(server, rec.Description); err != nil {
			return nil, nil, err
		}
	}
	return ws, func() {
		c.server(server).rec = rec
		for _, u := range ups {
			c.upsertDoc(u.doc)
		}
	}, nil
}

func (c *Catalog) planRevocation(r *subjects.Revocation) ([]write, func(), error) {
	rec := c.curRec(r.Server)
	set := make(map[string]struct{}, len(rec.Revoked))
	for _, t := range rec.Revoked {
		set[t] = struct{}{}
	}
	rec.AllRevoked = r.Apply(set, rec.AllRevoked)
	rec.Revoked = sortedKeys(set)
	if len(rec.Revoked) == 0 {
		rec.Revoked = nil
	}
	return []write{putJSON(serverKey(r.Server), rec)}, func() { c.server(r.Server).rec = rec }, nil
}

// parallelFor calls fn(0..n-1) on every core when n is large enough to be worth it.
func parallelFor(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/32)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// rejections collects the rejected definitions of one list, at most MaxRejected, and counts the
// others.
type rejections struct {
	recs []rejRec
	more int
}

// maxSkipLogs is how many unusable definitions of one snapshot are logged one by one.
const maxSkipLogs = MaxRejected

// maxCodeBytes bounds a rejection code taken from the stream.
const maxCodeBytes = 64

func (r *rejections) add(name, code, msg string) {
	if len(r.recs) >= MaxRejected {
		r.more++
		return
	}
	if code == "" {
		code = subjects.CodeInvalidDefinition
	}
	r.recs = append(r.recs, rejRec{Name: cutText(name, maxRejectedText), Code: cutText(code, maxCodeBytes),
		Message: cutText(msg, maxRejectedText)})
}

// addListed adds the rejections of a snapshot (registrysync's: names redacted there).
func (r *rejections) addListed(listed []subjects.Rejected) {
	for _, x := range listed {
		r.add(x.Name, x.Code, x.Message)
	}
}

// cutText makes s valid UTF-8 and cuts it to at most n bytes on a rune boundary, marking the
// cut; the result shares no memory with s (a substring would keep a whole decoded event alive).
func cutText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return strings.Clone(s)
}

// itemName is the "name" of a raw definition that was not otherwise decoded, "" if it has
// none (for what is shown of a rejected definition).
func itemName(raw []byte) string {
	var name string
	jsonscan.Members(raw, func(key, value []byte) {
		if n, ok := jsonscan.Name(key); ok && n == "name" && name == "" {
			var v string
			if json.Unmarshal(value, &v) == nil {
				name = cutText(v, maxRejectedText)
			}
		}
	})
	return name
}

func singular(k subjects.Kind) string { return strings.TrimSuffix(string(k), "s") }
