package indexer

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// direct is an in-memory catalog that applies registry events without NATS, in order, from
// sequence 1 (tests of the catalog's state, not of the consumer).
type direct struct {
	*Catalog
	t   testing.TB
	seq uint64
}

func openDirect(t testing.TB, pol *policy.Policy) *direct {
	t.Helper()
	c, err := Open(Config{InMemory: true, Policy: pol, Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	c.markReady()
	return &direct{Catalog: c, t: t}
}

func (d *direct) apply(evs ...any) {
	d.t.Helper()
	for _, ev := range evs {
		subject, data := eventMsg(d.t, ev)
		d.seq++
		if err := d.applyMsg(d.seq, subject, data); err != nil {
			d.t.Fatalf("apply %d: %v", d.seq, err)
		}
	}
}

func (d *direct) digest() string {
	d.t.Helper()
	s, err := d.Digest()
	if err != nil {
		d.t.Fatalf("digest: %v", err)
	}
	return s
}

// TestCrashInSplitCommitReplaysToSameState: a message whose writes are split over several
// Badger transactions (a snapshot too large for one) may be cut by a crash after any of them;
// the replica then reloads what was committed and applies the message again. The package doc
// promises the same result: the same content (Digest) as a replica that applied it whole, and
// the same "removed" answers.
func TestCrashInSplitCommitReplaysToSameState(t *testing.T) {
	a, b, c := tool("alpha", "first tool"), tool("beta", "second tool"), tool("gamma", "third tool")
	scenarios := map[string]struct{ before, last []any }{
		"removal":     {[]any{status("s", subjects.StatusReady), snapshot("s", "d", a, b, c)}, []any{snapshot("s", "d", a)}},
		"restoration": {[]any{status("s", subjects.StatusReady), snapshot("s", "d", a, b, c), snapshot("s", "d", a)}, []any{snapshot("s", "d", a, b, c)}},
		"server gone": {[]any{status("s", subjects.StatusReady), snapshot("s", "d", a, b, c)}, []any{status("s", subjects.StatusRemoved)}},
	}
	for name, sc := range scenarios {
		t.Run(name, func(t *testing.T) {
			ref := openDirect(t, nil)
			ref.apply(sc.before...)
			ref.apply(sc.last...)
			want := ref.digest()

			// The writes of the last message, as commit would split them.
			probe := openDirect(t, nil)
			probe.apply(sc.before...)
			subject, data := eventMsg(t, sc.last[0])
			ev, err := decodeEvent(subject, data)
			if err != nil {
				t.Fatal(err)
			}
			probe.applying = probe.seq + 1
			ws, _, err := probe.plan(ev)
			if err != nil {
				t.Fatal(err)
			}
			ws, _ = probe.forgetRemoved(ws, nil)

			for cut := 1; cut < len(ws); cut++ {
				r := openDirect(t, nil)
				r.apply(sc.before...)
				// A crash after a first transaction holding ws[:cut] (without the sequence).
				txn := r.db.NewTransaction(true)
				for _, w := range ws[:cut] {
					if w.Value == nil {
						err = txn.Delete(w.Key)
					} else {
						err = txn.Set(w.Key, w.Value)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := txn.Commit(); err != nil {
					t.Fatal(err)
				}
				// Restart: the in-memory state is rebuilt from the store, then the message
				// is applied again.
				r.mu.Lock()
				r.reset()
				if err := r.load(); err != nil {
					t.Fatal(err)
				}
				r.mu.Unlock()
				r.apply(sc.last...)
				if got := r.digest(); got != want {
					t.Errorf("crash after %d of %d writes: digest differs from a replica that applied the message whole", cut, len(ws))
				}
				for _, n := range []string{"s__alpha", "s__beta", "s__gamma"} {
					g := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{n}})
					w := ref.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{n}})
					if (g.Error == nil) != (w.Error == nil) || g.Error != nil && (g.Error.Reason != w.Error.Reason || g.Error.Message != w.Error.Message) {
						t.Errorf("crash after %d of %d writes: details %s = %+v, want %+v", cut, len(ws), n, g.Error, w.Error)
					}
				}
			}
		})
	}
}

var _ = badger.ErrKeyNotFound

// TestPrivateServerNotListedAfterListChanged: a server whose only list is private to one
// authorization context is not listed to anyone else (TestPrivateScope); a list_changed of
// another kind, of which no list was ever received, does not make it (and its description)
// visible to everyone.
func TestPrivateServerNotListedAfterListChanged(t *testing.T) {
	d := openDirect(t, nil)
	priv := snapshot("payroll", "Payroll of acme", tool("get_salary", "Read the salary of an employee"))
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "tenant:acme/user:carol"
	d.apply(status("payroll", subjects.StatusReady), priv,
		&subjects.ListChanged{V: subjects.Version, Type: subjects.EventChanged, Server: "payroll", Kind: subjects.KindPrompts, At: t0})
	ctx := context.Background()
	for _, s := range d.Servers(ctx, subjects.ServersRequest{Principal: subjects.Principal{Tenant: "acme", User: "dave"}}).Servers {
		if s.Name == "payroll" {
			t.Errorf("listed outside its authorization context: %+v", s)
		}
	}
	found := false
	for _, s := range d.Servers(ctx, subjects.ServersRequest{Principal: subjects.Principal{Tenant: "acme", User: "carol"}}).Servers {
		found = found || s.Name == "payroll" && s.Tools == 1
	}
	if !found {
		t.Errorf("not listed (with its tool) in its own authorization context")
	}
}

// TestStatsDuringRebuild: Stats (metrics, the CLI) may run while Follow drops the catalog to
// rebuild it (the registry stream was recreated): no data race (go test -race).
func TestStatsDuringRebuild(t *testing.T) {
	d := openDirect(t, nil)
	d.apply(status("s", subjects.StatusReady), snapshot("s", "d", tool("alpha", "first tool")))
	info := func(created time.Time) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Created: created, State: jetstream.StreamState{FirstSeq: 1, LastSeq: d.seq, Msgs: d.seq}}
	}
	if err := d.checkOrigin(info(t0)); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for range 100_000 { // until stopped
			select {
			case <-stop:
				return
			default:
			}
			d.Stats()
		}
	}()
	for i := range 50 {
		if err := d.checkOrigin(info(t0.Add(time.Duration(i+1) * time.Second))); err != nil { // recreated
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}

// TestScoreIgnoresHiddenTools: the score of a tool a principal may see does not depend on tools
// private to another authorization context (with catalog-wide IDF and average lengths, a
// returned score told how many hidden tools hold a word).
func TestScoreIgnoresHiddenTools(t *testing.T) {
	score := func(withPrivate bool) float64 {
		d := openDirect(t, nil)
		var evs []any
		evs = append(evs, fillerServers([]string{"a", "b", "c", "d", "e", "f"}, "another thing")...)
		evs = append(evs, status("pub", subjects.StatusReady), snapshot("pub", "public", tool("pay", "compute the payroll of an employee")))
		if withPrivate {
			priv := snapshot("hr", "hr", tool("salary", "payroll salary"), tool("bonus", "payroll bonus"), tool("x", "payroll x"))
			priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "user:carol"
			evs = append(evs, status("hr", subjects.StatusReady), priv)
		}
		d.apply(evs...)
		rep := find(t, d.Catalog, "payroll", as(subjects.Principal{Tenant: "acme", User: "dave"}))
		if len(rep.Tools) != 1 {
			t.Fatalf("dave's search: %+v", rep)
		}
		return rep.Tools[0].Score
	}
	if a, b := score(false), score(true); a != b {
		t.Errorf("dave's score for pub__pay depends on carol's private tools: %v without, %v with", a, b)
	}
}

// TestScoresIgnorePolicyDeniedTools: for a principal the policy restricts, the tools it may not
// call weigh on nothing it is shown: not on a score, nor through a query word only they hold.
func TestScoresIgnorePolicyDeniedTools(t *testing.T) {
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"dave": {Tenant: "acme", Roles: []string{"staff"}}},
		Rules:      []policy.Rule{{Name: "staff", Roles: []string{"staff"}, Allow: []string{"pub__*", "s*__*"}}},
	})
	dave := as(subjects.Principal{Tenant: "acme", User: "dave"})
	scores := func(withDenied bool, query string) map[string]float64 {
		d := openDirect(t, pol)
		var evs []any
		evs = append(evs, fillerServers([]string{"sa", "sb", "sc", "sd", "se", "sf"}, "another payroll thing")...)
		evs = append(evs, status("pub", subjects.StatusReady), snapshot("pub", "public", tool("pay", "compute the payroll of an employee")))
		if withDenied {
			evs = append(evs, status("hr", subjects.StatusReady), snapshot("hr", "human resources",
				tool("salary", "payroll salary"), tool("bonus", "payroll bonus"), tool("x", "payroll x employee")))
		}
		d.apply(evs...)
		rep := find(t, d.Catalog, query, dave)
		out := map[string]float64{}
		for _, ti := range rep.Tools {
			out[ti.Name] = ti.Score
		}
		return out
	}
	base := scores(false, "payroll employee")
	if len(base) == 0 {
		t.Fatal("no results for dave")
	}
	for _, q := range []string{"payroll employee", "payroll employee salary bonus"} {
		if got := scores(true, q); !maps.Equal(got, base) {
			t.Errorf("%q with hr's denied tools in the catalog: %v, want %v (as without them)", q, got, base)
		}
	}
}

// TestScoresFollowAListTurningPrivate: a list that turns private to another user, its tools
// unchanged, stops weighing on a principal's scores at once (the statistics kept for it are
// not reused past a change of scopes).
func TestScoresFollowAListTurningPrivate(t *testing.T) {
	dave := as(subjects.Principal{Tenant: "acme", User: "dave"})
	pub := func(d *direct) {
		var evs []any
		evs = append(evs, fillerServers([]string{"a", "b", "c", "d", "e", "f"}, "another thing")...)
		// A list private to carol from the start: dave's searches take the statistics of what
		// he may see, kept from one search to the next.
		cz := snapshot("cz", "carol's", tool("notes", "carol notes"))
		cz.CacheScope, cz.AuthContext = subjects.ScopePrivate, "user:carol"
		d.apply(append(evs, status("pub", subjects.StatusReady), snapshot("pub", "public", tool("pay", "compute the payroll of an employee")),
			status("cz", subjects.StatusReady), cz)...)
	}
	hrTools := []json.RawMessage{tool("salary", "payroll salary"), tool("bonus", "payroll bonus"), tool("x", "payroll x")}
	alone := openDirect(t, nil)
	pub(alone)
	want := find(t, alone.Catalog, "payroll", dave)

	d := openDirect(t, nil)
	pub(d)
	d.apply(status("hr", subjects.StatusReady), snapshot("hr", "hr", hrTools...))
	if rep := find(t, d.Catalog, "payroll", dave); len(rep.Tools) < 2 {
		t.Fatalf("hr's public tools not found: %+v", rep.Tools)
	}
	priv := snapshot("hr", "hr", hrTools...)
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "user:carol"
	d.apply(priv)
	got := find(t, d.Catalog, "payroll", dave)
	if len(got.Tools) != 1 || len(want.Tools) != 1 || got.Tools[0].Score != want.Tools[0].Score {
		t.Errorf("after hr turned private to carol: %+v, want %+v", got.Tools, want.Tools)
	}
}

// TestFullDetailsNotAheadOfTheAnswer: a message is stored before the in-memory state applies
// it, so a full answer read its definitions from a store that could be ahead: a tool re-listed
// in a list the principal may not see could give out its new definition. A stored definition
// that is not the one the answer was built from is left out.
func TestFullDetailsNotAheadOfTheAnswer(t *testing.T) {
	d := openDirect(t, nil)
	d.apply(status("pub", subjects.StatusReady), snapshot("pub", "public", tool("pay", "compute the payroll of an employee")))
	// The next message, stored but not applied yet: pub__pay's new definition.
	secret := tool("pay", "compute the payroll; internal endpoint hr.example.internal")
	if err := commit(d.Catalog.db, []write{{Key: toolKey("pub", "pay"), Value: toolRec{Public: "pub__pay", Def: secret}.encode()}}, d.Catalog.Seq()); err != nil {
		t.Fatal(err)
	}
	rep := find(t, d.Catalog, "payroll", func(r *subjects.SearchRequest) { r.Detail = subjects.DetailFull })
	det := d.Catalog.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"pub__pay"}})
	for _, tools := range [][]subjects.ToolInfo{rep.Tools, det.Tools} {
		if len(tools) != 1 {
			t.Fatalf("answer %+v (search error %+v, details error %+v)", tools, rep.Error, det.Error)
		}
		if strings.Contains(string(tools[0].Definition), "internal") || strings.Contains(tools[0].Description, "internal") {
			t.Errorf("a definition not yet applied was given out: %s", tools[0].Definition)
		}
	}
}

// TestVisibleKeyByClass: principals the policy and the private lists treat alike share their
// search statistics; names a client makes up do not make one key each (a cache of 256 keys
// cycled by made-up user names made every search a pass over the whole catalog).
func TestVisibleKeyByClass(t *testing.T) {
	pol := mustPolicy(t, &policy.Config{Rules: []policy.Rule{{Name: "staff", Roles: []string{"staff"}, Allow: []string{"*"}}}})
	d := openDirect(t, pol)
	carol := snapshot("hr", "hr", tool("salary", "payroll salary"))
	carol.CacheScope, carol.AuthContext = subjects.ScopePrivate, "user:carol"
	d.apply(status("hr", subjects.StatusReady), carol)
	c := d.Catalog
	c.mu.RLock()
	defer c.mu.RUnlock()
	key := func(user string, roles ...string) string {
		return c.visibleKey(subjects.Principal{Tenant: "acme", User: user, Roles: roles})
	}
	if key("made-up-1", "staff") != key("made-up-2", "staff", "other") {
		t.Error("two made-up users of one role have different keys")
	}
	if key("made-up-1", "staff") == key("carol", "staff") {
		t.Error("carol, whose private list the others may not see, shares their key")
	}
	if key("made-up-1", "staff") == key("made-up-1") {
		t.Error("a principal the policy treats differently shares the key")
	}
}

// TestBooleanOutputSchemaKept: a boolean outputSchema (allowed by 2026-07-28, kept by the
// connector) is in the tool's details, not dropped as if it were not an object.
func TestBooleanOutputSchemaKept(t *testing.T) {
	for _, s := range []string{"true", "false"} {
		d := parseDef(json.RawMessage(`{"name":"t","inputSchema":{"type":"object"},"outputSchema":` + s + `}`))
		if string(d.OutputSchema) != s {
			t.Errorf("outputSchema %s: got %q", s, d.OutputSchema)
		}
	}
	if d := parseDef(json.RawMessage(`{"name":"t","outputSchema":"x"}`)); d.OutputSchema != nil {
		t.Errorf("a string outputSchema kept: %q", d.OutputSchema)
	}
}

// fillerServers are ready servers of two tools each, the second described as second.
func fillerServers(names []string, second string) []any {
	var evs []any
	for _, s := range names {
		evs = append(evs, status(s, subjects.StatusReady),
			snapshot(s, "server "+s, tool("t1", "does thing one "+s), tool("t2", second+" "+s)))
	}
	return evs
}

// TestFullDetailsShowTheEnforcedScope: a catalog written before scopes were normalized on the
// way in may hold "Private"; it is enforced as private, and full details say "private", not
// the word as it was stored.
func TestFullDetailsShowTheEnforcedScope(t *testing.T) {
	d := openDirect(t, nil)
	priv := snapshot("hr", "hr", tool("salary", "payroll salary"))
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "user:carol"
	d.apply(status("hr", subjects.StatusReady), priv)
	d.servers["hr"].kinds[subjects.KindTools].CacheScope = "Private" // as an older version stored it
	carol := subjects.Principal{User: "carol"}
	rep := find(t, d.Catalog, "salary", as(carol), func(r *subjects.SearchRequest) { r.Detail = subjects.DetailFull })
	if len(rep.Tools) != 1 {
		t.Fatalf("search answer %+v, error %+v", rep.Tools, rep.Error)
	}
	if got := rep.Tools[0].CacheScope; got != subjects.ScopePrivate {
		t.Errorf("cacheScope shown %q, want %q", got, subjects.ScopePrivate)
	}
	if rep := find(t, d.Catalog, "salary", as(subjects.Principal{User: "dave"})); len(rep.Tools) != 0 {
		t.Errorf("shown outside its authorization context: %+v", rep.Tools)
	}
}
