package executor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/suggest"
)

// tool is what the executor knows of one listed tool.
type tool struct {
	Public      string
	Server      string
	Name        string          // original name on the server
	InputSchema json.RawMessage // raw, byte-faithful
	Fingerprint string          // of the snapshot that listed it (schema cache key)
	ReadOnly    bool            // annotations.readOnlyHint: true
	Idempotent  bool            // annotations.idempotentHint: true
	Destructive bool            // annotations.destructiveHint: true (and not read-only)

	// OutputSchema is the raw outputSchema (an object or a boolean schema), nil when the tool
	// declares none: its results are checked against it (see checkOutput).
	OutputSchema json.RawMessage

	// key is suggest.Key(Name): see registry.sorted.
	key string

	schema compiledSchema // compiled on first use
	output compiledSchema // the outputSchema, compiled on the first result
	// outputWarned: the log said once that this definition's outputSchema cannot be used.
	outputWarned atomic.Bool

	// removed: the tool is no longer listed, and the table keeps this entry only while the view
	// remembers it as removed (see forget), so that a call of it is refused stale, not
	// not_found. It holds what that refusal and the policy asked before it read (the names,
	// the fingerprint and the hints), never the definition: no schema, no compiled state
	// (see removedEntry). A call admitted before the removal keeps the entry it was admitted
	// with.
	removed bool
}

// removedEntry is what the table keeps of t once its server no longer lists it: a server that
// renames its big tools on every re-list would otherwise have the executor hold every
// definition the view remembers as removed (staleness.MaxRemembered a server, each up to
// subjects.MaxDefinitionBytes).
func (t *tool) removedEntry() *tool {
	if t.removed {
		return t
	}
	return &tool{Public: t.Public, Server: t.Server, Name: t.Name, Fingerprint: t.Fingerprint,
		ReadOnly: t.ReadOnly, Idempotent: t.Idempotent, Destructive: t.Destructive, removed: true}
}

// sameDefinition reports whether t and u are one definition of one tool: what admission
// authorized, approved and validated a call against (name, schemas, hints).
func (t *tool) sameDefinition(u *tool) bool {
	return t == u || t.Public == u.Public && t.Server == u.Server && t.Name == u.Name &&
		bytes.Equal(t.InputSchema, u.InputSchema) && bytes.Equal(t.OutputSchema, u.OutputSchema) &&
		t.ReadOnly == u.ReadOnly && t.Idempotent == u.Idempotent && t.Destructive == u.Destructive
}

// definitionDigest identifies t's definition as sameDefinition compares it (name, schemas
// byte for byte, hints), across processes: an approval record names the definition its call
// was approved under, and a delivery of the call on another executor compares it with its own.
func (t *tool) definitionDigest() string {
	data, _ := json.Marshal(struct {
		Public, Server, Name              string
		InputSchema, OutputSchema         []byte // (as bytes: RawMessage would be compacted)
		ReadOnly, Idempotent, Destructive bool
	}{t.Public, t.Server, t.Name, t.InputSchema, t.OutputSchema, t.ReadOnly, t.Idempotent, t.Destructive})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// retrySafe reports whether the tool may run again: read-only or idempotent by annotation.
func (t *tool) retrySafe() bool { return t.ReadOnly || t.Idempotent }

// registry is the executor's in-memory view of the registry stream: a staleness.View plus the
// tool table by public name. It is rebuilt by replay at start (an ordered consumer).
type registry struct {
	view *staleness.View
	mu   sync.RWMutex
	// tools maps public name → tool. Entries of removed tools stay, without their definitions
	// (tool.removed: a call of one is refused stale, the view says removed), while the view
	// remembers them: see forget. apply changes it and the view under mu (see held).
	tools   map[string]*tool
	applied atomic.Uint64 // last registry stream sequence applied
	// first is the sequence of the first message applied that is not a confirmation (0: none
	// yet): see originLost.
	first atomic.Uint64
	// streamLast is the registry stream's last sequence as last seen (from each message taken,
	// and the stream's info every registryInfoEvery): streamLast − max(applied, through) is
	// the lag.
	streamLast atomic.Uint64
	// through is a sequence through which the executor took every message the stream still
	// held (follow: the stream's last sequence at its start, once nothing is pending after
	// the executor's position): messages deleted before it read them (confirmations whose
	// TTL ran out) are no lag.
	through atomic.Uint64
	// waiters are the calls waiting for a sequence to be applied (waitApplied), by sequence:
	// woken by advance, or all at once by reset (a sequence of the stream dropped names nothing
	// the replay will apply). Guarded by mu.
	waiters map[uint64][]chan struct{}
	// resets counts the times the view was dropped to be replayed (reset): a registry sequence
	// learned before (a re-list's snapshot) is of the stream as it was then. Guarded by mu.
	resets uint64
	log    zerolog.Logger

	// listed holds, per server, the names its last tools list gave the table: a public name
	// one of them holds is not taken by another pair (see apply). Guarded by mu.
	listed map[string]map[string]bool
	// gone holds, per server, the names of its tools no longer listed whose entries tools
	// keeps (without their definitions: tool.removed): bounded as the view bounds the names it
	// remembers as removed (staleness.MaxRemembered, the catalog's bound), so that a server
	// that renames its tools on every re-list does not grow the table forever. Guarded by mu.
	gone map[string]map[string]bool
	// maxGone is the view's bound on the tool names it remembers as removed a server, and so
	// gone's (staleness.MaxRemembered; less in some tests).
	maxGone int
	// names indexes the public names listed holds by their keys and their original names'
	// (for the names a not_found answer suggests). Guarded by mu.
	names suggest.Index
	// sorted holds, per server, the tools of its last tools list that the table holds, ordered
	// by bySuggestKey (for the names a not_found answer suggests): an order that is the same on
	// every executor whatever the order they were listed in. A list replaces the slice, never
	// changes it. Guarded by mu.
	sorted map[string][]*tool

	// caught is closed while the view holds at least what the stream held when it was last
	// dropped to be replayed (reset): until then it holds the stream's first events without
	// the later ones (a tool listed, not yet its revocation), and calls wait (caughtUp).
	// Guarded by mu.
	caught chan struct{}

	// onApply and onWait are test hooks (testHooks.registryApplied, registryWait); nil
	// outside tests.
	onApply func(seq uint64)
	onWait  func()
}

// bySuggestKey orders the tools of a server by the lengths of their names' keys, then by key,
// then by name: the tools whose keys have one length are one run, and in it those whose keys
// are alike are near one another.
func bySuggestKey(a, b *tool) int {
	if len(a.key) != len(b.key) {
		return cmp.Compare(len(a.key), len(b.key))
	}
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func newRegistry(log zerolog.Logger) *registry {
	return newRegistryRemembering(log, staleness.MaxRemembered)
}

// newRegistryRemembering is newRegistry with another bound on the removed tool names a server
// (tests); 0 is staleness.MaxRemembered.
func newRegistryRemembering(log zerolog.Logger, maxTools int) *registry {
	if maxTools <= 0 {
		maxTools = staleness.MaxRemembered
	}
	caught := make(chan struct{})
	close(caught) // (the first replay: the executor serves calls once it is ready)
	return &registry{view: staleness.NewRemembering(nil, maxTools), maxGone: maxTools, tools: map[string]*tool{}, listed: map[string]map[string]bool{}, sorted: map[string][]*tool{}, gone: map[string]map[string]bool{}, waiters: map[uint64][]chan struct{}{}, caught: caught, log: log}
}

// caughtUp waits until the view holds what the stream held when it was last dropped to be
// replayed (at once but during such a replay), or until ctx ends or stop is closed (nil: never).
// A view part way through a replay holds the stream's first events without the later ones: a
// tool revoked, removed or made stale by a later event is fresh in it, and a call decided on
// it ran a revoked tool.
func (r *registry) caughtUp(ctx context.Context, stop <-chan struct{}) error {
	r.mu.RLock()
	ch := r.caught
	r.mu.RUnlock()
	select {
	case <-ch:
		return nil
	default:
	}
	if r.onWait != nil {
		r.onWait()
	}
	select {
	case <-ch:
		return nil
	case <-stop:
		return errStopping
	case <-ctx.Done():
		return ctx.Err()
	}
}

// markCaughtUp records that the replay reached what the stream held when it began (caughtUp).
func (r *registry) markCaughtUp() {
	r.mu.Lock()
	select {
	case <-r.caught:
	default:
		close(r.caught)
	}
	r.mu.Unlock()
}

// lookup returns the tool of a public name, or nil. A plain name of an unknown tool still maps
// to its (server, tool) so that freshness can say why it is unknown.
func (r *registry) lookup(public string) *tool {
	r.mu.RLock()
	t := r.tools[public]
	r.mu.RUnlock()
	return t
}

// held returns the view's verdict of t's tool and the entry the table holds under t's public
// name (nil: none), read together: apply changes both under mu, so a verdict that the tool is
// listed never comes with the entry its removal left (tool.removed), nor the reverse.
func (r *registry) held(t *tool) (staleness.Verdict, *tool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.view.Tool(t.Server, t.Name), r.tools[t.Public]
}

// generation is the number of times the view was dropped to be replayed (reset) so far: a
// registry sequence learned while it is g names an event of the stream the view then followed.
func (r *registry) generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.resets
}

// toolCaughtUp is the view's verdict of t's tool, read once the view has caught up with the
// stream (as heldCaughtUp reads it), after confirm (nil: none) ran on it under the same lock;
// replayed says whether the view was dropped to be replayed since generation gen. It waits at
// most until ctx ends (its error then) or stop is closed (errStopping; nil: never).
func (r *registry) toolCaughtUp(ctx context.Context, stop <-chan struct{}, t *tool, gen uint64, confirm func()) (v staleness.Verdict, replayed bool, err error) {
	for {
		r.mu.RLock()
		select {
		case <-r.caught:
			if confirm != nil {
				confirm() // (the view's own lock is taken after the registry's, as apply takes it)
			}
			v, replayed = r.view.Tool(t.Server, t.Name), r.resets != gen
			r.mu.RUnlock()
			return v, replayed, nil
		default: // replaying
		}
		r.mu.RUnlock()
		if err := r.caughtUp(ctx, stop); err != nil {
			return staleness.Verdict{}, false, err
		}
	}
}

// heldCaughtUp is held, read once the view has caught up with the stream (caughtUp), under the
// lock that check is made in: a reset between the two would have it read a view part way
// through its replay. It waits at most until ctx ends (its error then) or stop is closed
// (errStopping).
func (r *registry) heldCaughtUp(ctx context.Context, stop <-chan struct{}, t *tool) (staleness.Verdict, *tool, error) {
	for {
		r.mu.RLock()
		select {
		case <-r.caught:
			v, cur := r.view.Tool(t.Server, t.Name), r.tools[t.Public]
			r.mu.RUnlock()
			return v, cur, nil
		default: // replaying (or dropped again since the last wait)
		}
		r.mu.RUnlock()
		if err := r.caughtUp(ctx, stop); err != nil {
			return staleness.Verdict{}, nil, err
		}
	}
}

// suggestBudget bounds the tools one not_found answer weighs (see suggestions) among those the
// caller may be offered, however it finds them: a name whose key many listed names share, or
// that begins like a server with very many tools, stops there.
const suggestBudget = 5_000

// suggestChecks bounds how many tools one not_found answer asks may about (each at most once):
// the work of an answer stays bounded however many tools the caller may not see lie near the
// name. Past it the answer is cut short as when the budget is spent (still the same answer for
// the same table, may and given); only then, with more hidden tools nearer the name than this,
// can they change it.
const suggestChecks = 4 * suggestBudget

// suggestions returns, best first, at most suggest.Limit tools of the table that a caller who
// gave the name given (which the table does not hold, or which the caller may not see) probably
// meant and that may accepts: the same name but for case and separators, the same original name
// on another server, or a tool of a server given starts with (suggest.Servers) within
// suggest.MaxDistance edits.
//
// The answer depends only on the table, on what may accepts and on given: never on the order
// tools were listed in, nor on the tools may refuses. The names under a key are looked at in
// their order (suggest.Index.Lookup), at most suggest.Limit accepted ones of each: none after
// them could rank before them. Of a named server's tools (sorted), only those whose keys have a
// length within suggest.MaxDistance of the rest's are looked at (no other can be near enough):
// the rest's length first, then the nearest, and in each length from the keys that sort
// nearest the rest's outward. may is asked first, once per tool per answer, and only the tools
// it accepts count against suggestBudget: a tool the caller may not be offered costs that
// question, never a comparison, and never takes the place of another (up to suggestChecks
// questions, which bound the work). given's own tool is
// never suggested nor counted: the answer is the same whether it exists or not.
//
// may runs under the table's read lock: it must not take it (mayOffer reads the view, whose
// lock is taken after the table's elsewhere too, and the immutable policy).
func (r *registry) suggestions(given string, may func(*tool) bool) []string {
	if len(given) > suggest.MaxGiven {
		return nil
	}
	var cands []suggest.Candidate
	budget, checks := suggestBudget, suggestChecks
	asked := map[*tool]bool{}
	offered := func(t *tool) bool {
		ok, seen := asked[t]
		if !seen {
			if checks <= 0 {
				budget = 0 // spent: the loops stop at their next tool
				return false
			}
			checks--
			ok = may(t)
			asked[t] = ok
		}
		return ok
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	// near takes the first suggest.Limit tools of names (public names, sorted) that may accepts,
	// at distance d; it reports how many it took, and false when the budget is spent.
	near := func(names []string, d int) (int, bool) {
		took := 0
		for _, p := range names {
			t := r.tools[p]
			if t == nil || p == given {
				continue
			}
			if budget <= 0 {
				return took, false
			}
			if !offered(t) {
				continue
			}
			budget--
			cands = append(cands, suggest.Candidate{Public: p, Dist: d})
			if took++; took == suggest.Limit {
				break
			}
		}
		return took, true
	}
	took, more := near(r.names.Lookup(suggest.Key(given)), 0)
	if took == suggest.Limit || !more {
		return suggest.Rank(cands) // nothing else is as near
	}
	if _, name, ok := strings.Cut(given, "__"); ok {
		if _, more = near(r.names.Lookup(suggest.Key(name)), 1); !more { // the same name on another server
			return suggest.Rank(cands)
		}
	}
	suggest.Servers(given, func(server, name string) bool {
		tools := r.sorted[server]
		if len(tools) == 0 {
			return true
		}
		key := suggest.Key(name)
		for l := range suggest.Lengths(len(key)) {
			lo, _ := slices.BinarySearchFunc(tools, l, func(t *tool, l int) int { return cmp.Compare(len(t.key), l) })
			hi, _ := slices.BinarySearchFunc(tools[lo:], l+1, func(t *tool, l int) int { return cmp.Compare(len(t.key), l) })
			hi += lo
			at, _ := slices.BinarySearchFunc(tools[lo:hi], key, func(t *tool, key string) int { return strings.Compare(t.key, key) })
			for i := range suggest.Outward(lo, lo+at, hi) {
				t := tools[i]
				if t.Public == given || r.tools[t.Public] != t {
					continue
				}
				if budget <= 0 {
					return false
				}
				if !offered(t) {
					continue
				}
				budget--
				if d, ok := suggest.Within(key, t.key, suggest.MaxDistance); ok {
					cands = append(cands, suggest.Candidate{Public: t.Public, Dist: 1 + d})
				}
			}
		}
		return true
	})
	return suggest.Rank(cands)
}

// unindex removes from the suggestions' index the names of server's tools that names (its
// last list) holds and keep (its new list, nil when it is removed) does not, and adds those keep
// holds and names does not, in one update. Callers hold mu.
func (r *registry) unindex(server string, names, keep map[string]bool) {
	var remove, add []suggest.Pair
	for n := range names {
		if !keep[n] {
			remove = append(remove, suggest.Pair{Public: subjects.PublicName(server, n), Name: n})
		}
	}
	for n := range keep {
		if !names[n] {
			add = append(add, suggest.Pair{Public: subjects.PublicName(server, n), Name: n})
		}
	}
	r.names.Update(remove, add)
}

// forget records the tools of server that names (its last list) holds and keep (its new list,
// nil when it is removed) does not as gone, and those keep holds as listed again. The entry of a
// tool gone keeps its names and hints only (removedEntry): its definition is dropped. Once a
// server has maxGone (staleness.MaxRemembered) names gone, those the view has forgotten (see
// staleness.View.Apply) leave the table: a call of one is then not_found, as the view says
// unknown.
// Callers hold mu, and apply the event to the view first.
func (r *registry) forget(server string, names, keep map[string]bool) {
	gone := r.gone[server]
	for n := range names {
		if !keep[n] {
			if gone == nil {
				gone = map[string]bool{}
				r.gone[server] = gone
			}
			gone[n] = true
			pub := subjects.PublicName(server, n)
			if t := r.tools[pub]; t != nil && t.Server == server && t.Name == n {
				r.tools[pub] = t.removedEntry()
			}
		}
	}
	for n := range keep {
		delete(gone, n)
	}
	if len(gone) >= r.maxGone {
		for n := range gone {
			if r.view.Remembers(server, subjects.KindTools, n) {
				continue
			}
			delete(gone, n)
			pub := subjects.PublicName(server, n)
			if t := r.tools[pub]; t != nil && t.Server == server && t.Name == n {
				delete(r.tools, pub)
			}
		}
	}
	if len(gone) == 0 {
		delete(r.gone, server)
	}
}

// apply folds one registry message into the view and the tool table. A message whose payload
// does not match its subject (another server's, say) is ignored, as the catalog ignores it.
func (r *registry) apply(subject string, data []byte, seq uint64) {
	ev, err := subjects.DecodeRegistryMsg(subject, data)
	if err != nil {
		r.log.Warn().Err(err).Uint64("seq", seq).Msg("registry event ignored")
		r.advance(seq)
		return
	}
	ev.Seq = seq // a Confirmed lifts a ListChanged by its sequence
	// The view and the table change together, under mu (see held).
	r.mu.Lock()
	r.view.Apply(ev)
	if st := ev.Status; st != nil && st.Status == subjects.StatusRemoved {
		r.unindex(st.Server, r.listed[st.Server], nil)
		r.forget(st.Server, r.listed[st.Server], nil)
		delete(r.listed, st.Server) // its tools hold no name any more, as in the catalog
		delete(r.sorted, st.Server)
	}
	if sn := ev.Snapshot; sn != nil && sn.Kind == subjects.KindTools {
		// The definitions the catalog keeps (subjects.MaxDefinitionBytes, MaxToolNameBytes; the
		// first usable one of a name): what search shows is what runs.
		seen := map[string]bool{}
		var taken []*tool
		for _, raw := range sn.Items {
			if len(raw) > subjects.MaxDefinitionBytes {
				continue
			}
			t, ok := parseTool(sn.Server, sn.Fingerprint, raw)
			if !ok || len(t.Name) > subjects.MaxToolNameBytes || seen[t.Name] {
				continue
			}
			// A public name held by another pair still listed (a 40-bit hash collision of
			// encoded names) stays with its holder, as the catalog keeps it: taking it would
			// run, and authorize, another tool than the one search shows under that name.
			if h := r.tools[t.Public]; h != nil && (h.Server != t.Server || h.Name != t.Name) &&
				(r.listed[h.Server][h.Name] || h.Server == sn.Server && seen[h.Name]) {
				r.log.Error().Str("server", sn.Server).Str("tool", t.Name).Str("public", t.Public).Str("holder", h.Server+"/"+h.Name).
					Msg("public name collision: refusing the tool rather than shadowing the one that holds the name")
				continue
			}
			seen[t.Name] = true
			r.tools[t.Public] = t
			taken = append(taken, t)
		}
		r.unindex(sn.Server, r.listed[sn.Server], seen)
		r.forget(sn.Server, r.listed[sn.Server], seen)
		r.listed[sn.Server] = seen
		slices.SortFunc(taken, bySuggestKey)
		r.sorted[sn.Server] = taken
	}
	r.mu.Unlock()
	r.advance(seq)
}

// advance records seq as applied and wakes waiters for it.
func (r *registry) advance(seq uint64) {
	r.applied.Store(seq)
	r.mu.Lock()
	for s, ws := range r.waiters {
		if s <= seq {
			for _, w := range ws {
				close(w)
			}
			delete(r.waiters, s)
		}
	}
	r.mu.Unlock()
}

// errReplayed: the view was dropped to be replayed (see reset) since the registry sequence
// waited for was learned; it may name nothing the replay applies, or another event.
var errReplayed = errors.New("the registry view was dropped to replay the stream")

// waitApplied blocks until the stream sequence seq, of the stream the view follows now, was
// applied, or ctx ends (see waitAppliedOf).
func (r *registry) waitApplied(ctx context.Context, seq uint64) error {
	return r.waitAppliedOf(ctx, nil, seq, r.generation())
}

// waitAppliedOf blocks until the stream sequence seq, learned while the view's generation was
// gen (see generation), was applied, or ctx ends (its error) or stop is closed (errStopping;
// nil: never). A view dropped to be replayed since gen, or while it waits, ends the wait at
// once with errReplayed: the stream purged, or created again (its sequences start over), may
// never hold seq, or hold another event there, applied part way through the replay.
func (r *registry) waitAppliedOf(ctx context.Context, stop <-chan struct{}, seq, gen uint64) error {
	ch := make(chan struct{})
	r.mu.Lock()
	switch {
	case r.resets != gen:
		r.mu.Unlock()
		return errReplayed
	case r.applied.Load() >= seq:
		r.mu.Unlock()
		return nil
	}
	r.waiters[seq] = append(r.waiters[seq], ch)
	r.mu.Unlock()
	select {
	case <-ch:
		if r.generation() != gen {
			return errReplayed // (woken by reset, or reset since)
		}
		return nil
	case <-stop:
		r.forgetWaiter(seq, ch)
		return errStopping
	case <-ctx.Done():
		r.forgetWaiter(seq, ch)
		return ctx.Err()
	}
}

// forgetWaiter removes ch, a wait for seq given up (waitAppliedOf), from the waiters. Not
// forgotten, it would stay until seq is applied: never, for a sequence past the stream's (a
// re-list reply is outside input), and every call that waited in vain would add one, each
// weighed by every advance.
func (r *registry) forgetWaiter(seq uint64, ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ws := r.waiters[seq]; ws != nil {
		ws = slices.DeleteFunc(ws, func(w chan struct{}) bool { return w == ch })
		if len(ws) == 0 {
			delete(r.waiters, seq)
		} else {
			r.waiters[seq] = ws
		}
	}
}

// parseTool reads the parts of a raw tool definition the executor needs. Junk is skipped.
//
// Members are read by their exact names, as the connector validated them and the catalog reads
// them: encoding/json would also match "NAME" or "InputSchema" to a struct field (the last
// such member winning), so a server could give the executor another name, schema or hint than
// the one everyone else sees.
//
// Hints count only when a server states them: a tool is read-only or idempotent (retry-safe)
// only with readOnlyHint or idempotentHint true, and destructive (approval under the default
// policy) only with destructiveHint true and readOnlyHint not true.
func parseTool(server, fingerprint string, raw json.RawMessage) (*tool, bool) {
	var d map[string]json.RawMessage
	if json.Unmarshal(raw, &d) != nil {
		return nil, false
	}
	var name string
	if json.Unmarshal(d["name"], &name) != nil || name == "" {
		return nil, false
	}
	t := &tool{
		Public:      subjects.PublicName(server, name),
		Server:      server,
		Name:        name,
		key:         suggest.Key(name),
		InputSchema: d["inputSchema"],
		Fingerprint: fingerprint,
	}
	if out := bytes.TrimSpace(d["outputSchema"]); len(out) > 0 && !bytes.Equal(out, []byte("null")) {
		t.OutputSchema = d["outputSchema"] // (null declares none, as the connector reads it)
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(d["annotations"], &a) == nil {
		t.ReadOnly = isTrue(a["readOnlyHint"])
		t.Idempotent = t.ReadOnly || isTrue(a["idempotentHint"])
		t.Destructive = !t.ReadOnly && isTrue(a["destructiveHint"])
	}
	return t, true
}

// isTrue reports whether a JSON value is the literal true.
func isTrue(v json.RawMessage) bool {
	var b bool
	return json.Unmarshal(v, &b) == nil && b
}

// follow consumes the registry stream from its start with an ordered consumer until ctx ends.
// ready is closed once the replay reached the stream's end as it was when follow started.
//
// A stream purged whole, or deleted and created again, while the executor follows it (the
// ordered consumer just goes on, from its position: in a new stream, past the events stored
// first) is noticed at the next read of its info (registryInfoEvery): the executor then drops
// what it knows and replays the stream from its start, as a catalog replica does, so that it
// holds what a new executor would: the lists registrysync publishes again, and not the tools
// of servers nobody publishes any more.
func (r *registry) follow(ctx context.Context, js jetstream.JetStream, ready chan<- struct{}) error {
	stream, err := js.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		return fmt.Errorf("registry stream: %w", err)
	}
	var once sync.Once
	markReady := func() {
		once.Do(func() { close(ready) })
		r.markCaughtUp() // (a replay after reset: calls wait until then)
	}
	info := stream.CachedInfo()
	for replays := 0; ; replays++ {
		lost, why, err := r.replay(ctx, stream, info, markReady)
		switch {
		case err != nil && replays == 0:
			return err
		case err != nil:
			// Once ready (the first replay's errors end Run): the stream deleted again, NATS
			// away. Tried again once the stream's info is read.
			r.log.Warn().Err(err).Msg("cannot replay the registry stream again; retrying")
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(registryInfoEvery):
				}
				if info, err = stream.Info(ctx); err == nil {
					break
				}
			}
			r.reset(info.State.LastSeq)
			continue
		case lost == nil:
			return nil
		}
		r.log.Warn().Str("why", why).Uint64("seq", r.applied.Load()).Uint64("stream_first", lost.State.FirstSeq).
			Uint64("stream_last", lost.State.LastSeq).Msg("dropping the registry view to replay the stream from its start")
		r.reset(lost.State.LastSeq)
		info = lost
	}
}

// replay consumes the registry stream, which info describes, from its start until ctx ends
// (it returns nil) or the stream no longer holds what the executor applied (it returns the
// stream's info and why: see originLost).
func (r *registry) replay(ctx context.Context, stream jetstream.Stream, info *jetstream.StreamInfo, markReady func()) (*jetstream.StreamInfo, string, error) {
	state, created := info.State, info.Created
	last := state.LastSeq
	r.sawLast(last)
	// reached: the replay reached what the stream held (markReady called, once a replay: every
	// message past that point says it reached it again, and markReady takes the registry's
	// lock).
	var reached atomic.Bool
	ready := func() {
		if !reached.Swap(true) {
			markReady()
		}
	}
	if last == 0 || state.Msgs == 0 {
		// Nothing to replay. (A stream purged, or whose every event had a TTL that ran out,
		// holds no message at its last sequence: none will come to say the replay reached it.)
		ready()
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.RegistryAll},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, "", fmt.Errorf("registry consumer: %w", err)
	}
	// stopped: the replay is over; a message its consumer hands over after is not applied.
	var applyMu sync.Mutex
	stopped := false
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		applyMu.Lock()
		defer applyMu.Unlock()
		if stopped {
			return
		}
		r.sawLast(md.Sequence.Stream + md.NumPending)
		if r.first.Load() == 0 {
			// The origin: the first message that is not a confirmation, which registrysync
			// stores with a per-message TTL (the stream's first sequence moves past those
			// without a purge).
			if sub, err := subjects.ParseRegistry(m.Subject()); err != nil || sub.Event != subjects.EventConfirmed {
				r.first.Store(md.Sequence.Stream)
			}
		}
		r.apply(m.Subject(), m.Data(), md.Sequence.Stream)
		if r.onApply != nil {
			r.onApply(md.Sequence.Stream)
		}
		if md.NumPending == 0 {
			noteMax(&r.through, last) // what it did not apply up to last was deleted
		}
		if md.Sequence.Stream >= last || md.NumPending == 0 {
			ready()
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			r.log.Debug().Err(err).Msg("registry consumer")
		}
	}))
	if err != nil {
		return nil, "", fmt.Errorf("registry consume: %w", err)
	}
	stop := func() {
		applyMu.Lock()
		stopped = true
		applyMu.Unlock()
		cc.Stop()
	}
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		noteMax(&r.through, last) // nothing held after the executor's position
		ready()                   // (nor will any message come to say so)
	}
	// The stream's end, read now and then: a consumer that stalls takes no message that would
	// say how far behind it is; and whether the stream still holds what was applied.
	t := time.NewTicker(registryInfoEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			return nil, "", nil
		case <-t.C:
			// What was applied is read before the stream's info: an event applied while the
			// request travels lies past the info's last sequence.
			first, applied := r.first.Load(), r.applied.Load()
			info, err := stream.Info(ctx)
			if err != nil {
				continue
			}
			r.sawLast(info.State.LastSeq)
			if why := originLost(info, created, first, applied); why != "" {
				stop()
				return info, why, nil
			}
			if !reached.Load() && r.consumedAll(ctx, stream) {
				noteMax(&r.through, last) // what it did not apply up to last was deleted
				ready()
			}
		}
	}
}

// consumedAll reports whether the replay applied every message the registry stream holds:
// the last one it holds now, of any registry subject, was applied (or it holds none), though no
// message said the replay reached it. (Its last messages deleted after the consumer was handed
// the ones before them, which said more were pending: a confirmation's TTL run out, a purge by
// subject. No message past them comes until the next registry event, and calls would wait for
// it. The consumer's info says nothing of it: the server counts the deleted messages
// delivered.)
func (r *registry) consumedAll(ctx context.Context, stream jetstream.Stream) bool {
	m, err := stream.GetLastMsgForSubject(ctx, subjects.RegistryAll)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return true // it holds none
	case err != nil:
		return false
	}
	return r.applied.Load() >= m.Sequence
}

// originLost says why the events the executor applied, from the stream created at created, are
// not those the stream info describes holds ("": they are): the stream was created again, or
// purged (the first event applied that is not a confirmation is gone: the stream keeps every
// other event for good). first and applied are r's, read before info was.
func originLost(info *jetstream.StreamInfo, created time.Time, first, applied uint64) string {
	switch {
	case !info.Created.Equal(created):
		return "the registry stream was created again"
	case applied > info.State.LastSeq:
		return "the executor is ahead of the registry stream"
	case first > 0 && first < info.State.FirstSeq:
		return "the registry stream no longer holds the events the executor applied (purged)"
	}
	return ""
}

// reset forgets every event applied (see follow); last is the stream's last sequence.
func (r *registry) reset(last uint64) {
	r.mu.Lock()
	for server, names := range r.listed {
		r.unindex(server, names, nil)
	}
	clear(r.tools)
	clear(r.listed)
	clear(r.gone)
	clear(r.sorted)
	r.view.Reset()
	r.resets++
	for seq, ws := range r.waiters {
		// Their sequences are of the stream dropped: each wait ends (errReplayed), to be
		// decided on the view once the replay caught up, not at the sequence's turn (never,
		// in a stream created again that holds fewer events; part way through the replay,
		// with another event there).
		for _, w := range ws {
			close(w)
		}
		delete(r.waiters, seq)
	}
	select {
	case <-r.caught:
		r.caught = make(chan struct{}) // calls wait for the replay (caughtUp)
	default:
	}
	r.first.Store(0)
	r.applied.Store(0)
	r.through.Store(0)
	r.streamLast.Store(last)
	r.mu.Unlock()
}

// registryInfoEvery is how often a following executor reads the registry stream's info (a
// variable: tests shorten it).
var registryInfoEvery = 5 * time.Second

// sawLast raises streamLast to n when n is larger.
func (r *registry) sawLast(n uint64) { noteMax(&r.streamLast, n) }

// lag is how many registry messages up to streamLast the executor has not applied yet.
func (r *registry) lag() uint64 {
	applied, last := r.applied.Load(), r.streamLast.Load()
	return last - min(max(applied, r.through.Load()), last)
}

// noteMax raises v to n when n is larger.
func noteMax(v *atomic.Uint64, n uint64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
