package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRegistryConsumersDifferential is a seeded, bounded differential test of the registry
// stream's consumers: random histories (snapshots of several cache scopes and authorization
// contexts, with and without a TTL, with duplicate and nameless items; list_changed, also before
// any list and of servers never announced; confirmations answering, predating or ignoring a
// list_changed, of the list held or another; statuses, removal and return of a server;
// revocations of listed, unknown and every tool, and restorations; malformed messages of several
// kinds) are published to an embedded NATS registry stream, and followed by
//
//   - catalog replica A, live from the start (on disk);
//   - catalog replica B, live from the start, stopped at a random point and restarted later on its
//     directory (it resumes from its sequence);
//   - catalog replica C, opened on an empty directory at the end (rebuilt by replay);
//   - the executor's registry (staleness view and tool table), live from the start, and a second
//     one that replays the stream at the end.
//
// At the end, the three catalogs hold the same digest and answer details (every public name ever
// listed, for principals of each authorization context) and servers alike; the two executor
// registries hold the same verdicts; and for every public name, what a catalog shows (the tool in
// a state, removed, or nothing) is what the executor's registry says of it. Every clock is one
// fixed time, so that TTLs are decided alike.
func TestRegistryConsumersDifferential(t *testing.T) {
	histories := 6
	if testing.Short() {
		histories = 2
	}
	for i := range histories {
		seed := uint64(20261202 + i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRegistryDifferential(t, seed, 120) })
	}
}

var rdServers = []struct {
	name  string
	tools []string
}{
	{"alpha", []string{"read", "Read", "write", "x y"}},
	{"beta.io", []string{"get", "put", "del"}},
	{"gamma", []string{"list", "read"}},
}

var rdScopes = []struct{ scope, authContext string }{
	{"", ""}, {subjects.ScopePublic, ""}, {subjects.ScopePrivate, "tenant:acme"}, {subjects.ScopePrivate, "user:bob"},
}

// rdPrincipals ask the catalogs: one of each authorization context and the local one.
var rdPrincipals = []subjects.Principal{
	{Tenant: "local", User: "local"}, {Tenant: "acme", User: "alice"}, {Tenant: "beta", User: "bob"},
}

type rdEvent struct {
	subject string
	data    []byte
	what    string
}

type rdHistory struct {
	events []rdEvent
	pubs   []string // every public name ever listed, sorted
}

func genRegistryHistory(seed uint64, n int, now time.Time) *rdHistory {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	h := &rdHistory{}
	pubs := map[string]bool{}
	add := func(subject string, v any, what string) {
		var data []byte
		if b, ok := v.([]byte); ok {
			data = b
		} else {
			data, _ = json.Marshal(v)
		}
		h.events = append(h.events, rdEvent{subject, data, what})
	}
	seq := func() uint64 { return uint64(len(h.events)) } // of the last event (an empty stream)
	lastFP := map[string][]string{}                       // server → fingerprints it listed, last last
	lastChanged := map[string]uint64{}
	for range n {
		s := pick(rng, rdServers)
		switch p := rng.IntN(100); {
		case p < 36:
			var items []json.RawMessage
			var names []string
			for _, tn := range s.tools {
				if rng.IntN(3) == 0 {
					continue
				}
				names = append(names, tn)
				pubs[subjects.PublicName(s.name, tn)] = true
				items = append(items, json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"%s of %s, rev %d","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":%t}}`,
					tn, tn, s.name, rng.IntN(2), rng.IntN(2) == 0)))
			}
			if len(items) > 0 && rng.IntN(6) == 0 { // the same name twice: the first is kept
				var first struct{ Name string }
				_ = json.Unmarshal(items[0], &first)
				items = append(items, json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"a duplicate","inputSchema":{"type":"object"}}`, first.Name)))
			}
			if rng.IntN(8) == 0 {
				items = append(items, json.RawMessage(`{"description":"no name"}`), json.RawMessage(`{"name":7}`))
			}
			sc := pick(rng, rdScopes)
			sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: s.name, Kind: subjects.KindTools, Pages: 1,
				CacheScope: sc.scope, AuthContext: sc.authContext, Items: items, ListedAt: now.Add(-time.Minute)}
			switch rng.IntN(6) {
			case 0:
				ttl := int64(time.Hour / time.Millisecond)
				sn.TTLMs = &ttl
			case 1: // expired already, until a confirmation
				ttl := int64(time.Hour / time.Millisecond)
				sn.TTLMs = &ttl
				sn.ListedAt = now.Add(-2 * time.Hour)
			case 2: // just at its end: not expired
				ttl := int64(time.Minute / time.Millisecond)
				sn.TTLMs = &ttl
			case 3: // stamped by a clock ahead: taken as now
				ttl := int64(time.Hour / time.Millisecond)
				sn.TTLMs = &ttl
				sn.ListedAt = now.Add(3 * time.Hour)
			}
			b, _ := json.Marshal(items)
			sum := sha256.Sum256(append(b, sc.scope+"/"+sc.authContext...))
			sn.Fingerprint = hex.EncodeToString(sum[:8])
			lastFP[s.name] = append(lastFP[s.name], sn.Fingerprint)
			add(subjects.RegistrySnapshot(s.name, subjects.KindTools), sn, fmt.Sprintf("snapshot %s %q %s/%s ttl=%v listedAt=%s fp=%s",
				s.name, names, sc.scope, sc.authContext, sn.TTLMs != nil, now.Sub(sn.ListedAt), sn.Fingerprint))
		case p < 40:
			sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: s.name, Kind: subjects.KindPrompts, Pages: 1, Fingerprint: "p" + fmt.Sprint(rng.IntN(3)),
				ListedAt: now.Add(-time.Minute), Items: []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}}
			add(subjects.RegistrySnapshot(s.name, subjects.KindPrompts), sn, "prompts "+s.name)
		case p < 50:
			name := s.name
			if rng.IntN(5) == 0 {
				name = "ghost" // never announced
			}
			kind := subjects.KindTools
			if rng.IntN(6) == 0 {
				kind = subjects.KindPrompts
			}
			add(subjects.RegistryChanged(name, kind), subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: name, Kind: kind, At: now},
				"changed "+name+" "+string(kind))
			if name == s.name && kind == subjects.KindTools {
				lastChanged[s.name] = seq()
			}
		case p < 62:
			cf := subjects.Confirmed{V: 1, Type: subjects.EventConfirmed, Server: s.name, Kind: subjects.KindTools, ListedAt: now.Add(-30 * time.Minute)}
			if fps := lastFP[s.name]; len(fps) > 0 {
				cf.Fingerprint = fps[len(fps)-1]
				if rng.IntN(4) == 0 {
					cf.Fingerprint = pick(rng, fps) // maybe an older list's
				}
			} else {
				cf.Fingerprint = "never-listed"
			}
			switch rng.IntN(5) {
			case 0, 1:
				cf.AfterSeq = lastChanged[s.name] // answers it
			case 2:
				cf.AfterSeq = max(lastChanged[s.name], 1) - 1 // began before it
			case 3:
				cf.AfterSeq = seq() + 1 // the confirmation's own sequence: after every changed
			}
			switch rng.IntN(6) {
			case 0:
				cf.ListedAt = now.Add(-3 * time.Hour) // older than the list: restarts nothing
			case 1:
				cf.ListedAt = now.Add(time.Hour) // a clock ahead
			case 2:
				cf.Server = "ghost" // a server never listed
			}
			add(subjects.RegistryConfirmed(cf.Server, subjects.KindTools), cf, fmt.Sprintf("confirmed %s fp=%s afterSeq=%d listedAt=%s", cf.Server, cf.Fingerprint, cf.AfterSeq, now.Sub(cf.ListedAt)))
		case p < 70: // removed, then added again (its new status before any new list)
			add(subjects.RegistryStatus(s.name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: subjects.StatusRemoved, At: now},
				"status "+s.name+" removed")
			st := pick(rng, []string{subjects.StatusReady, subjects.StatusConnecting})
			add(subjects.RegistryStatus(s.name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: st, At: now},
				"status "+s.name+" "+st+" (added again)")
		case p < 78:
			st := pick(rng, []string{subjects.StatusReady, subjects.StatusReady, subjects.StatusUnavailable, subjects.StatusConnecting, subjects.StatusRemoved})
			ev := subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: st, At: now}
			if st == subjects.StatusUnavailable {
				ev.Code, ev.Reason = subjects.CodeConnectionLost, "gone away"
			}
			add(subjects.RegistryStatus(s.name), ev, "status "+s.name+" "+st)
		case p < 88:
			rv := subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: s.name, At: now}
			if rng.IntN(8) == 0 {
				rv.Server = "ghost" // a server never announced (yet)
			}
			names := []string{pick(rng, s.tools)}
			switch rng.IntN(4) {
			case 0:
				names = []string{"unknown_tool"}
			case 1:
				names = []string{"*"}
			}
			if rng.IntN(3) == 0 {
				rv.Restore = names
			} else {
				rv.Tools = names
			}
			add(subjects.RegistryRevoked(rv.Server), rv, fmt.Sprintf("revoked %s tools=%q restore=%q", rv.Server, rv.Tools, rv.Restore))
		default:
			bad := []struct {
				subject string
				data    string
			}{
				{subjects.RegistryStatus(s.name), `{"v":1,"type":"status","server":3}`},
				{subjects.RegistryStatus(s.name), fmt.Sprintf(`{"v":1,"type":"status","server":%q}`, s.name)}, // no status
				{subjects.RegistryRevoked(s.name), fmt.Sprintf(`{"server":%q,"tools":["*"]}`, s.name)},        // no v, no type
				{subjects.RegistrySnapshot(s.name, subjects.KindTools), fmt.Sprintf(`{"v":1,"type":"snapshot","server":"other","kind":"tools","items":[]}`)},
				{subjects.RegistryChanged(s.name, subjects.KindTools), `not json`},
				{subjects.RegistrySnapshot(s.name, subjects.KindTools), fmt.Sprintf(`{"v":2,"type":"snapshot","server":%q,"kind":"tools","items":[]}`, s.name)},
				{subjects.RegistryStatus(s.name), fmt.Sprintf(`{"v":1,"type":"revoked","server":%q,"tools":["*"]}`, s.name)}, // type of another subject
			}
			b := pick(rng, bad)
			add(b.subject, []byte(b.data), "malformed "+b.data)
		}
	}
	h.pubs = sortedKeysOf(pubs)
	return h
}

func sortedKeysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rdReplica is one catalog replica following the stream.
type rdReplica struct {
	cat    *indexer.Catalog
	cancel context.CancelFunc
	done   chan error
	// opened is the sequence the catalog held when opened, before it followed the stream (read
	// after, it may have applied the events published while it was stopped).
	opened uint64
}

func startRDReplica(t *testing.T, env *natstest.Env, dir string, now func() time.Time) *rdReplica {
	t.Helper()
	cat, err := indexer.Open(indexer.Config{Dir: dir, Now: now, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rdReplica{cat: cat, cancel: cancel, done: make(chan error, 1), opened: cat.Seq()}
	go func() { r.done <- cat.Follow(ctx, env.JS) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *rdReplica) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("replica: %v", err)
	}
	r.cancel = nil
	if err := r.cat.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// startRDRegistry starts the executor's registry consumer on its own (the executor's view of the
// stream, without the rest of the executor), on the clock now.
func startRDRegistry(t *testing.T, env *natstest.Env, now func() time.Time) *registry {
	t.Helper()
	r := newRegistry(zerolog.Nop())
	r.view = staleness.New(now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- r.follow(ctx, env.JS, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("registry: %v", err)
		}
	})
	return r
}

func runRegistryDifferential(t *testing.T, seed uint64, n int) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	runRDHistory(t, genRegistryHistory(seed, n, now), now, seed)
}

// runRDHistory publishes h and compares its consumers (see TestRegistryConsumersDifferential);
// seed picks where replica B stops and restarts.
func runRDHistory(t *testing.T, h *rdHistory, now time.Time, seed uint64) {
	clock := func() time.Time { return now }
	defer func() {
		if t.Failed() {
			var b strings.Builder
			for i, ev := range h.events {
				fmt.Fprintf(&b, "\n  %3d %s", i+1, ev.what)
			}
			t.Logf("history:%s", b.String())
		}
	}()
	env := startNATS(t, natsembed.Config{})
	rng := rand.New(rand.NewPCG(seed, 1))
	stopAt := 1 + rng.IntN(max(len(h.events)-1, 1))
	restartAt := stopAt + rng.IntN(len(h.events)-stopAt)

	base := t.TempDir()
	a := startRDReplica(t, env, filepath.Join(base, "a"), clock)
	b := startRDReplica(t, env, filepath.Join(base, "b"), clock)
	live := startRDRegistry(t, env, clock)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	checks := map[int]bool{}
	for range 6 {
		checks[rng.IntN(len(h.events)+1)] = true
	}
	for i, ev := range h.events {
		if checks[i] {
			// The live replica and the executor's registry agree at this point too, not only at
			// the end (a state a later list would hide).
			waitFor(t, "replica A at a check point", func() bool { return a.cat.Seq() >= uint64(i) && a.cat.Ready() })
			waitFor(t, "the registry at a check point", func() bool { return live.applied.Load() >= uint64(i) })
			rdAgree(t, fmt.Sprintf("replica A after event %d", i), a.cat, live, h.pubs)
		}
		if i == stopAt {
			waitFor(t, "replica B at the stop point", func() bool { return b.cat.Seq() >= uint64(i) })
			b.stop(t)
		}
		if i == restartAt {
			b = startRDReplica(t, env, filepath.Join(base, "b"), clock)
			if got := b.opened; got != uint64(stopAt) {
				t.Errorf("restarted replica B at sequence %d, want %d", got, stopAt)
			}
		}
		ack, err := env.JS.Publish(ctx, ev.subject, ev.data)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != uint64(i+1) {
			t.Fatalf("event %d stored at sequence %d", i+1, ack.Sequence)
		}
	}
	last := uint64(len(h.events))
	c := startRDReplica(t, env, filepath.Join(base, "c"), clock)
	replay := startRDRegistry(t, env, clock)
	for _, r := range []*rdReplica{a, b, c} {
		waitFor(t, "a replica caught up", func() bool { return r.cat.Seq() >= last && r.cat.Ready() })
	}
	for _, r := range []*registry{live, replay} {
		waitFor(t, "an executor registry caught up", func() bool { return r.applied.Load() >= last })
	}
	if a.cat.Stats().BadEvents == 0 {
		t.Logf("no malformed event in this history")
	}

	// 1. The catalogs agree.
	cats := map[string]*rdReplica{"A (live)": a, "B (restarted)": b, "C (replayed)": c}
	want, err := a.cat.Digest()
	if err != nil {
		t.Fatal(err)
	}
	wantAnswers := rdAnswers(t, a.cat, h.pubs)
	for name, r := range cats {
		if r == a {
			continue
		}
		if got, _ := r.cat.Digest(); got != want {
			t.Errorf("replica %s: digest differs from A's", name)
		}
		if got := rdAnswers(t, r.cat, h.pubs); got != wantAnswers {
			t.Errorf("replica %s answers differ from A's:\n%s", name, rdFirstDiff(got, wantAnswers))
		}
	}

	// 2. The executor's registries agree.
	for _, pub := range h.pubs {
		lv, rv := rdVerdict(live, pub), rdVerdict(replay, pub)
		if lv != rv {
			t.Errorf("%s: live executor registry says %s, replayed one %s", pub, lv, rv)
		}
	}

	// 3. What each catalog shows of a name is what the executor's registry says of it.
	for name, r := range cats {
		rdAgree(t, "replica "+name, r.cat, live, h.pubs)
	}
}

// rdAgree checks that what cat shows of each public name (for principals of each authorization
// context) is what the executor registry reg says of it.
func rdAgree(t *testing.T, name string, cat *indexer.Catalog, live *registry, pubs []string) {
	t.Helper()
	ctxQ := context.Background()
	open, _ := policy.New(nil)
	for _, pr := range rdPrincipals {
		rp, err := open.Resolve(pr)
		if err != nil {
			t.Fatal(err)
		}
		for _, pub := range pubs {
			det := cat.Details(ctxQ, subjects.DetailsRequest{V: 1, Names: []string{pub}, Principal: pr})
			got := "not_found"
			switch {
			case det.Error == nil && len(det.Tools) == 1:
				ti := det.Tools[0]
				got = fmt.Sprintf("%s/%s %s", ti.Server, ti.Tool, ti.State)
			case det.Error != nil && det.Error.Code == subjects.CodeNotFound && det.Error.Reason == subjects.StateRemoved:
				got = "removed"
			case det.Error != nil && det.Error.Code == subjects.CodeNotFound:
			default:
				t.Fatalf("details %s: %+v", pub, det)
			}
			exp := "not_found"
			if tl := live.lookup(pub); tl != nil {
				v := live.view.Tool(tl.Server, tl.Name)
				switch {
				case !open.MayUseScope(rp, v.CacheScope, v.AuthContext):
				case v.State == staleness.Removed:
					exp = "removed"
				case v.State == staleness.Revoked && !live.listedNow(tl):
					// Revoked takes precedence in the view; the catalog keeps a tool no
					// longer listed as removed (as TestCatalogExecutorAgree accepts).
					exp = "removed"
				case v.State != staleness.Unknown:
					exp = fmt.Sprintf("%s/%s %s", tl.Server, tl.Name, v.State)
				}
			}
			if strings.HasSuffix(got, " removed") {
				// A list stored after its server's removal: the catalog holds its tools,
				// each shown removed.
				got = "removed"
			}
			if got != exp {
				tl := live.lookup(pub)
				var v staleness.Verdict
				if tl != nil {
					v = live.view.Tool(tl.Server, tl.Name)
				}
				t.Errorf("%s, %s/%s: catalog shows %s as %q, executor registry %q (verdict %+v)", name, pr.Tenant, pr.User, pub, got, exp, v)
			}
		}
	}
}

// listedNow reports whether t is in its server's last tools list as the registry holds it.
func (r *registry) listedNow(t *tool) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listed[t.Server][t.Name]
}

// rdVerdict is what an executor registry says of a public name: the pair it maps to and the
// freshness verdict.
func rdVerdict(r *registry, pub string) string {
	t := r.lookup(pub)
	if t == nil {
		return "no entry"
	}
	v := r.view.Tool(t.Server, t.Name)
	return fmt.Sprintf("%s/%s %s (%s) scope %s/%s fp %s listedAt %s; schema %s", t.Server, t.Name, v.State, v.Reason, v.CacheScope, v.AuthContext, v.Fingerprint,
		v.ListedAt.Format(time.RFC3339Nano), t.InputSchema)
}

// rdAnswers is everything a catalog answers for the names, principals and servers listing, as
// JSON.
func rdAnswers(t *testing.T, c *indexer.Catalog, pubs []string) string {
	t.Helper()
	ctx := context.Background()
	var out []any
	for _, pr := range rdPrincipals {
		for _, pub := range pubs {
			out = append(out, c.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{pub}, Principal: pr}))
		}
		out = append(out, c.Servers(ctx, subjects.ServersRequest{V: 1, Principal: pr}))
		rep := c.Search(ctx, subjects.SearchRequest{V: 1, Query: "read write get put del list", K: 100, Principal: pr, IncludeUnavailable: true})
		for i := range rep.Tools {
			rep.Tools[i].Score = 0
		}
		slices.SortFunc(rep.Tools, func(a, b subjects.ToolInfo) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, rep)
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rdFirstDiff(got, want string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			lo := max(0, i-400)
			return fmt.Sprintf("at byte %d:\n got …%s…\nwant …%s…", i, got[lo:min(len(got), i+200)], want[lo:min(len(want), i+200)])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(got), len(want))
}
