package staleness

import (
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// State is the freshness of one tool (or prompt, or resource).
type State string

// States, see the package doc.
const (
	Fresh       State = "fresh"
	Expired     State = "expired"
	Stale       State = "stale"
	Unavailable State = "unavailable"
	Removed     State = "removed"
	Revoked     State = "revoked"
	Unknown     State = "unknown"
)

// Usable reports whether a call may proceed (after revalidation, for Expired).
func (s State) Usable() bool { return s == Fresh || s == Expired }

// MaxRemembered bounds the tool names a kind remembers as removed (beyond those of its last
// snapshot): a server that renames its tools on every re-list must not grow the view forever. It
// is per server, and equal to the catalog's bound (indexer.DefaultMaxRemoved, 50,000 names in
// all; this package cannot import indexer, a test checks they agree). A tool name is at most
// subjects.MaxToolNameBytes (4 KiB: 200 MiB a server at this bound, at worst). The executor keeps
// the name, server and hints of each tool its view remembers as removed, not its definition, so
// that a call of it is refused stale. Past it a call of a forgotten name is not_found (README's
// error-code table says so) — refused all the same. It is New's bound: a view made by
// NewRemembering (the catalog's, which never asks about a tool no longer listed) has its own.
const MaxRemembered = 50_000

// MaxRememberedItems bounds the prompt and resource names a kind remembers as removed, as
// MaxRemembered bounds tool names: lower, for their names (a resource's uri) have no bound of
// their own but their definitions' (registrysync's MaxDefinitionBytes).
const MaxRememberedItems = 4096

// maxRemembered is the bound on the names kind remembers as removed, tool names maxTools.
func maxRemembered(kind subjects.Kind, maxTools int) int {
	if kind == subjects.KindTools {
		return maxTools
	}
	return MaxRememberedItems
}

// Verdict is a State with why.
type Verdict struct {
	State  State
	Reason string
	// ListedAt is when the list holding the item was last confirmed.
	ListedAt time.Time
	// CacheScope and AuthContext of the list ("" / "public" = shareable).
	CacheScope  string
	AuthContext string
	// Fingerprint of that list ("" if none): a re-list confirmed the list held only when it
	// names this fingerprint.
	Fingerprint string
}

type kindState struct {
	// listed says a snapshot of the kind was applied: a list_changed alone (before the first
	// listing, or after a failed one) makes a kindState that lists nothing yet.
	listed bool
	items  map[string]struct{}
	// removed holds the names the kind remembers as removed, each with the scope of the list
	// it was last in (not the scope of the list that left it out): who may not see that list
	// may not learn that it held the name.
	removed map[string]listScope
	// held counts the names of removed that the list dropped with its server held (see
	// forget): until the next snapshot they count as its list for the bound, not beyond it.
	held int
	// max is the kind's bound on the names removed holds (maxRemembered).
	max   int
	stale bool
	// staleSeq is the stream sequence of the ListChanged that made the list stale (the latest
	// applied); 0 while stale: unknown, and only a snapshot lifts it.
	staleSeq    uint64
	listedAt    time.Time
	ttl         *time.Duration
	cacheScope  string
	authContext string
	fingerprint string
}

// listScope is the cache scope and authorization context of a list.
type listScope struct{ cacheScope, authContext string }

type serverState struct {
	status  string
	code    string
	reason  string
	kinds   map[subjects.Kind]*kindState
	revoked map[string]struct{}
	allRev  bool
	gone    bool // status removed
	// maxTools is the view's bound on the tool names a kind remembers as removed.
	maxTools int
}

// View is the freshness view of every server. The zero value is not usable; use New.
type View struct {
	mu      sync.RWMutex
	servers map[string]*serverState
	now     func() time.Time
	// maxTools bounds the tool names a kind remembers as removed (see NewRemembering).
	maxTools int
}

// New returns an empty view. now may be nil (time.Now). It remembers MaxRemembered removed tool
// names a server.
func New(now func() time.Time) *View { return NewRemembering(now, MaxRemembered) }

// NewRemembering is New with another bound on the removed tool names a server's view remembers
// beyond its list (at least 1): a consumer that never asks about a tool its server no longer
// lists — the catalog, which answers "removed" from its own records — need not hold
// MaxRemembered names a server (4 KiB each at most).
func NewRemembering(now func() time.Time, maxTools int) *View {
	if now == nil {
		now = time.Now
	}
	return &View{servers: map[string]*serverState{}, now: now, maxTools: max(maxTools, 1)}
}

// Reset forgets every server, as a new view would (a consumer replaying a registry stream that
// was purged, or deleted and created again).
func (v *View) Reset() {
	v.mu.Lock()
	clear(v.servers)
	v.mu.Unlock()
}

func (v *View) server(name string) *serverState {
	s := v.servers[name]
	if s == nil {
		s = &serverState{kinds: map[subjects.Kind]*kindState{}, revoked: map[string]struct{}{}, maxTools: v.maxTools}
		v.servers[name] = s
	}
	return s
}

func (s *serverState) kind(k subjects.Kind) *kindState {
	ks := s.kinds[k]
	if ks == nil {
		ks = &kindState{items: map[string]struct{}{}, removed: map[string]listScope{}, max: maxRemembered(k, s.maxTools)}
		s.kinds[k] = ks
	}
	return ks
}

// Apply folds one registry event into the view.
func (v *View) Apply(ev subjects.RegistryEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case ev.Snapshot != nil:
		sn := ev.Snapshot
		s := v.server(sn.Server)
		ks := s.kind(sn.Kind)
		next := make(map[string]struct{}, len(sn.Items))
		for _, raw := range sn.Items {
			if sn.Kind == subjects.KindTools && len(raw) > subjects.MaxDefinitionBytes {
				continue // skipped by the catalog and the executor: not in the list
			}
			if n := ItemName(sn.Kind, raw); n != "" && (sn.Kind != subjects.KindTools || len(n) <= subjects.MaxToolNameBytes) {
				next[n] = struct{}{}
			}
		}
		if len(ks.removed)-ks.held >= ks.max {
			// Bounded: older removals fall back to "unknown" (refused just the same). The
			// names of a list dropped with its server count as that list, as if it were
			// this snapshot's predecessor.
			clear(ks.removed)
		}
		ks.held = 0
		for n := range ks.items {
			if _, ok := next[n]; !ok {
				ks.removed[n] = listScope{ks.cacheScope, ks.authContext}
			}
		}
		for n := range next {
			delete(ks.removed, n)
		}
		ks.items, ks.listed = next, true
		ks.stale, ks.staleSeq = false, 0
		ks.listedAt = v.notAhead(sn.ListedAt)
		ks.ttl = nil
		if sn.TTLMs != nil {
			d := TTL(*sn.TTLMs)
			ks.ttl = &d
		}
		ks.cacheScope, ks.authContext, ks.fingerprint = sn.CacheScope, sn.AuthContext, sn.Fingerprint
	case ev.ListChanged != nil:
		ks := v.server(ev.ListChanged.Server).kind(ev.ListChanged.Kind)
		switch {
		case ev.Seq == 0:
			ks.staleSeq = 0 // of an unknown sequence: only a snapshot lifts it
		case !ks.stale:
			ks.staleSeq = ev.Seq
		case ks.staleSeq != 0:
			ks.staleSeq = max(ks.staleSeq, ev.Seq)
		}
		ks.stale = true
	case ev.Status != nil:
		st := ev.Status
		s := v.server(st.Server)
		s.status, s.code, s.reason = st.Status, st.Code, st.Reason
		s.gone = st.Status == subjects.StatusRemoved
		if s.gone {
			// Its lists go with it, as the catalog drops them: a server added again under the
			// name lists nothing until its next snapshot. Without this, its old lists came
			// back fresh (or stale, or unavailable) with its next status, while every catalog
			// said their tools were removed. Their items are remembered as removed, each with
			// the scope of its list.
			for _, ks := range s.kinds {
				ks.forget()
			}
		}
	case ev.Revocation != nil:
		s := v.server(ev.Revocation.Server)
		s.allRev = ev.Revocation.Apply(s.revoked, s.allRev)
	case ev.Confirmed != nil:
		cf := ev.Confirmed
		v.lift(cf)
		v.confirm(cf.Server, cf.Kind, cf.Fingerprint, cf.ListedAt)
	}
}

// forget drops the list of a kind (its server was removed): its items are remembered as
// removed, and the kind lists nothing, as before its first snapshot. The names it moves count
// as the dropped list for the bound (held): the snapshot that follows a removal (registrysync
// retracts every kind with an empty one) or a repeated removal forgets no more than a snapshot
// replacing that list would, also when the list alone reaches the bound (maxRemembered).
func (ks *kindState) forget() {
	if len(ks.items) > 0 && len(ks.removed)-ks.held >= ks.max {
		// Bounded, as a snapshot bounds it; a kind that lists nothing (a repeated removal)
		// adds no name, and forgets none.
		clear(ks.removed)
		ks.held = 0
	}
	for n := range ks.items {
		ks.removed[n] = listScope{ks.cacheScope, ks.authContext}
	}
	*ks = kindState{items: map[string]struct{}{}, removed: ks.removed, held: ks.held + len(ks.items), max: ks.max}
}

// TTL is the duration of a ttlMs: negative values are 0, and values past what a
// time.Duration holds (about 292 years) are the longest one, never wrapped around.
func TTL(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Confirm records that a re-list at listedAt found the list of kind unchanged (fingerprint),
// restarting its TTL without a new snapshot. listedAt may be on this process's clock (the
// executor passes when it asked for the re-list: a registrysync host's clock may be behind by
// more than the TTL). A confirmation of another fingerprint is ignored:
// the snapshot that changed it is on its way. Confirm does not lift a list_changed:
// it may come from a re-list made before the change (its answer and the list_changed travel
// apart). A subjects.Confirmed event on the registry stream restarts the TTL the same way
// (Apply), so every consumer learns of a confirmation, not only the one that asked for the
// re-list; one whose AfterSeq names the list_changed the list is stale for (or a later one)
// also lifts it (see Answers).
func (v *View) Confirm(server string, kind subjects.Kind, fingerprint string, listedAt time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.confirm(server, kind, fingerprint, listedAt)
}

// confirm is Confirm with v.mu held.
func (v *View) confirm(server string, kind subjects.Kind, fingerprint string, listedAt time.Time) {
	s := v.servers[server]
	if s == nil {
		return
	}
	ks := s.kinds[kind]
	listedAt = v.notAhead(listedAt)
	if ks == nil || ks.fingerprint != fingerprint || listedAt.Before(ks.listedAt) {
		return
	}
	ks.listedAt = listedAt
}

// lift makes a list that a ListChanged made stale fresh again when the Confirmed cf answers it:
// it names the fingerprint the view holds, and a ListChanged sequence (AfterSeq) at least the
// one the list is stale for. v.mu is held.
func (v *View) lift(cf *subjects.Confirmed) {
	s := v.servers[cf.Server]
	if s == nil {
		return
	}
	if ks := s.kinds[cf.Kind]; ks != nil && ks.stale && Answers(cf, ks.fingerprint, ks.staleSeq) {
		ks.stale, ks.staleSeq = false, 0
	}
}

// Answers reports whether the Confirmed cf lifts the staleness of a list of fingerprint that the
// ListChanged at stream sequence changedSeq made stale: cf confirms that fingerprint, and its
// re-list began after that ListChanged was stored (AfterSeq >= changedSeq). A changedSeq of 0
// (not known) and a Confirmed without AfterSeq never do. The catalog and this view decide
// with it.
func Answers(cf *subjects.Confirmed, fingerprint string, changedSeq uint64) bool {
	return changedSeq > 0 && cf.AfterSeq >= changedSeq && fingerprint != "" && cf.Fingerprint == fingerprint
}

// notAhead is t, or this process's now when t is later: a listedAt stamped by a host whose
// clock is ahead of this one would keep the list fresh for its TTL plus the skew, and make every
// later confirmation (stamped by this clock, or a host's that is right) look older than the
// list held and be ignored. The TTL then counts from when the list reached this view.
func (v *View) notAhead(t time.Time) time.Time {
	if now := v.now(); t.After(now) {
		return now
	}
	return t
}

// Tool is the verdict for a tool.
func (v *View) Tool(server, name string) Verdict { return v.Item(server, subjects.KindTools, name) }

// Item is the verdict for one item of a kind.
func (v *View) Item(server string, kind subjects.Kind, name string) Verdict {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.servers[server]
	if s == nil {
		return Verdict{State: Unknown, Reason: "server " + server + " is not known"}
	}
	// A revoked or removed item keeps the scope of the list it was in: who may not see that list
	// may not learn its state either. An item the last list left out was in an earlier one,
	// whose scope it keeps (see kindState.removed).
	ks := s.kinds[kind]
	var out Verdict
	if ks != nil {
		out = Verdict{ListedAt: ks.listedAt, CacheScope: ks.cacheScope, AuthContext: ks.authContext, Fingerprint: ks.fingerprint}
		if _, listed := ks.items[name]; !listed {
			if sc, was := ks.removed[name]; was {
				out.CacheScope, out.AuthContext = sc.cacheScope, sc.authContext
			}
		}
	}
	if s.allRev {
		out.State, out.Reason = Revoked, "every tool of "+server+" is revoked"
		return out
	}
	if _, ok := s.revoked[name]; ok && kind == subjects.KindTools {
		out.State, out.Reason = Revoked, name+" was revoked by an operator"
		return out
	}
	if s.gone {
		out.State, out.Reason = Removed, "server "+server+" was removed"
		return out
	}
	if ks != nil && !ks.listed {
		if _, was := ks.removed[name]; was {
			// Of a list dropped with its server (removed, then added again), not listed
			// since.
			out.State, out.Reason = Removed, name+" is no longer listed by "+server
			return out
		}
	}
	if ks == nil || !ks.listed {
		// Never listed (a list_changed may have come first): while the server is not ready it
		// may list the item once it is.
		if s.status != "" && s.status != subjects.StatusReady {
			return Verdict{State: Unavailable, Reason: s.statusReason()}
		}
		return Verdict{State: Unknown, Reason: server + " has not been listed"}
	}
	if _, ok := ks.items[name]; !ok {
		if _, was := ks.removed[name]; was {
			out.State, out.Reason = Removed, name+" is no longer listed by "+server
			return out
		}
		out.State, out.Reason = Unknown, name+" is not listed by "+server
		return out
	}
	if s.status != "" && s.status != subjects.StatusReady {
		out.State, out.Reason = Unavailable, s.statusReason()
		return out
	}
	if ks.stale {
		out.State, out.Reason = Stale, server+" announced that its "+string(kind)+" changed; re-listing"
		return out
	}
	if ks.ttl != nil && v.now().Sub(ks.listedAt) > *ks.ttl {
		out.State, out.Reason = Expired, "ttl of "+ks.ttl.String()+" has run out"
		return out
	}
	out.State = Fresh
	return out
}

// MayUseAList reports whether may accepts the cache scope and authorization context of some
// list of server that the view holds (a kind listed, not only announced as changed, nor dropped
// with its server), or whether it holds none: to whom the catalog shows the server (its servers
// listing; indexer's mayUseAList). A server whose every list is private to another context is
// that context's, its very existence and status included. may is called with the view locked.
func (v *View) MayUseAList(server string, may func(cacheScope, authContext string) bool) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.servers[server]
	if s == nil {
		return true
	}
	listed := false
	for _, ks := range s.kinds {
		if !ks.listed {
			continue
		}
		listed = true
		if may(ks.cacheScope, ks.authContext) {
			return true
		}
	}
	return !listed
}

// Remembers reports whether the view knows name as an item of kind of server: in its last list,
// or remembered as removed from it (at most MaxRemembered tool names beyond the list,
// MaxRememberedItems of other kinds). A name it does
// not remember is unknown to it, whatever else it says of the server (revoked, removed).
func (v *View) Remembers(server string, kind subjects.Kind, name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.servers[server]
	if s == nil || s.kinds[kind] == nil {
		return false
	}
	ks := s.kinds[kind]
	_, listed := ks.items[name]
	_, removed := ks.removed[name]
	return listed || removed
}

func (s *serverState) statusReason() string {
	r := "server is " + s.status
	if s.code != "" {
		r += " (" + s.code + ")"
	}
	if s.reason != "" {
		r += ": " + s.reason
	}
	return r
}

// ServerStatus returns the last status of a server ("" if none was seen), its code and its
// reason.
func (v *View) ServerStatus(server string) (status, code, reason string) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.servers[server]
	if s == nil {
		return "", "", ""
	}
	return s.status, s.code, s.reason
}

// ItemName extracts the identifying name of a raw definition: "name" for tools and prompts,
// "uri" (or "name") for resources. It returns "" for junk. It reads exactly those keys, as
// the connector's validation and the catalog do (a struct decode would also take "Name" or
// "NAME", and fail on a "uri" that is not a string): every reader of a definition agrees on
// its name, so the catalog holds no tool this view does not know.
func ItemName(kind subjects.Kind, raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if kind == subjects.KindResources {
		if uri := stringValue(m["uri"]); uri != "" {
			return uri
		}
	}
	return stringValue(m["name"])
}

// stringValue is the string raw holds ("" if it holds no string).
func stringValue(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
