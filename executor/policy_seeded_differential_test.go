package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestPolicySeededDifferential draws random policies (POLICY_DIFF_SEEDS of them from
// POLICY_DIFF_SEED0: principals in several tenants with roles, or none listed; rules naming
// tenants, users and roles exactly or with "*"; allow, deny and approve patterns: exact,
// server-wide, tool-wide, prefix, '?' and class globs; case and non-ASCII names;
// approveDestructive on or off) over one catalog: the Go demo servers (ticketing lists
// privately, to the host alone) behind a real registrysync, plus a server of non-ASCII and
// case-twin names published on the registry stream whose list changes scope and contents. For
// every principal asked (configured, unknown, of another tenant) and every tool, three sides
// must agree with the policy package itself:
//
//   - the catalog: details show the tool, or not_found (a tool the principal may not call gets
//     the answer of one nobody lists); select: finds it with the needs-approval label exactly
//     when the policy wants an approval; a search, a search for needs-approval and the servers'
//     counts show only what details shows;
//   - the executor: unknown_principal, not_found for a list private to someone else, forbidden
//     for what the policy does not allow, needs_approval (asked not to wait) when it wants an
//     approval, and otherwise the call goes on (ok, or a failure no policy decides);
//   - policy.Resolve, MayUseScope and Decide on the same configuration.
//
// Also: a search ranks and scores, and a not_found answers (suggestions included), exactly as
// a catalog that shows the principal only what it may see (a reference replica whose policy
// allows each principal exactly those tools), lexically and (every other seed) hybrid; the
// executor suggests only visible names; the servers' rejected tools are only names the
// principal may call; tools the synthetic list dropped are stale to a call and removed to
// details exactly for whoever could see and call them, else not_found or forbidden alike.
//
// Each policy is checked after the catalog changes under it (the running replica and executor
// apply the new list), and again after both restart with another policy, the replica over its
// own directory: neither keeps a decision of the old one, not even for a call that waited for
// an approval the old policy wanted when its executor stopped (handed back, it is decided by
// the new policy: refused, run, or held for an approval again).
func TestPolicySeededDifferential(t *testing.T) {
	seed0, seeds := envSeeds("POLICY_DIFF", 2)
	r := startRig(t, rigOptions{servers: []string{"ticketing", "logging", "kb"}, noExecutor: true})
	h := &polHarness{t: t, r: r, dir: t.TempDir()}
	for _, s := range []string{"ticketing", "logging", "kb"} {
		h.waitSnapshot(s)
	}
	for seed := seed0; seed < seed0+uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x9011c7))
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			h.t = t
			h.hybrid = seed%2 == 0 // every other seed searches with vectors too
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with POLICY_DIFF_SEED0=%d POLICY_DIFF_SEEDS=1", seed)
				}
			}()
			h.publishSynth(rng)
			cfgA, cfgB := genPolicyConfig(rng), genPolicyConfig(rng)
			polA, polB := mustPolicy(t, cfgA), mustPolicy(t, cfgB)
			dir := filepath.Join(h.dir, fmt.Sprint(seed))
			stop := h.start(polA, dir)
			h.check("A", cfgA, polA, rng)
			// The catalog changes under the running policy.
			h.publishSynth(rng)
			h.waitApplied()
			h.check("A after a change of the catalog", cfgA, polA, rng)
			// Both restart with another policy; the replica keeps its directory. A call that
			// waits for an approval A wants is handed to the executor of B, which decides it
			// as B says.
			w := h.startWaitingCall(cfgA, polA, rng)
			stop()
			stop = h.start(polB, dir)
			if w != nil {
				h.finishWaitingCall(w, polB)
			}
			h.check("B after a restart", cfgB, polB, rng)
			stop()
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("seeds %d..%d: %d cases: %v", seed0, seed0+uint64(seeds)-1, h.cases, h.seen)
}

func mustPolicy(t *testing.T, cfg *policy.Config) *policy.Policy {
	t.Helper()
	p, err := policy.New(cfg)
	if err != nil {
		b, _ := json.Marshal(cfg)
		t.Fatalf("policy %s: %v", b, err)
	}
	return p
}

// The synthetic server: a non-ASCII name (every public name of it encoded), case twins, a
// non-ASCII tool, a tool with a space.
const synthServer = "Ünïcode"

var synthTools = []string{"Read", "read", "résumé", "写入", "del all", "get_x"}

// synthRejected are names the synthetic server's connector refused (Snapshot.Rejected).
var synthRejected = []string{"secret_rm", "Read_v2", "résumé_v2", "get_y"}

// Names the policies and the asked principals draw from: case twins and non-ASCII names.
var (
	polTenants = []string{"local", "acme", "Acme", "ünï"}
	polUsers   = []string{"local", "alice", "Alice", "bob", "zoë"}
	polRoles   = []string{"admin", "Admin", "support", "rôle"}
)

// polPatterns are the tool patterns the rules draw from.
var polPatterns = []string{
	"*", "*__*", "kb__*", "KB__*", "logging__get*", "logging__getLogs", "ticketing__*", "ticketing__close*",
	"*__get*", "*__*Issue", "kb__?et_document", "kb__[gs]*", "*__read", "*__Read", "*__[Rr]ead",
	synthServer + "__*", synthServer + "__r*", synthServer + "__r?sumé", synthServer + "__写*", synthServer + "__del all",
	"Ü*__*", "*__*é", "*ead", "logging*", "*s__*", "kb___x",
}

func genPolicyConfig(rng *rand.Rand) *policy.Config {
	if rng.IntN(8) == 0 {
		return nil // the open policy
	}
	cfg := &policy.Config{}
	switch rng.IntN(3) {
	case 0:
		cfg.ApproveDestructive = new(bool)
	case 1:
		cfg.ApproveDestructive = new(bool)
		*cfg.ApproveDestructive = true
	}
	if rng.IntN(2) == 0 {
		cfg.Principals = map[string]policy.PrincipalConfig{}
		done := map[[2]string]bool{}
		for range 2 + rng.IntN(5) {
			tenant, user := pick(rng, polTenants), pick(rng, polUsers)
			if done[[2]string{tenant, user}] {
				continue
			}
			done[[2]string{tenant, user}] = true
			pc := policy.PrincipalConfig{Roles: subset(rng, polRoles, 0.4)}
			key := user
			switch {
			case rng.IntN(2) == 0:
				key = tenant + "/" + user
			case tenant != "local" || rng.IntN(2) == 0:
				pc.Tenant = tenant
			}
			if _, taken := cfg.Principals[key]; taken {
				continue
			}
			cfg.Principals[key] = pc
		}
	}
	names := func(from []string, p float64) []string {
		if rng.IntN(2) == 0 {
			return nil // any
		}
		out := subset(rng, from, p)
		if rng.IntN(5) == 0 {
			out = append(out, "*")
		}
		if len(out) == 0 {
			out = []string{pick(rng, from)}
		}
		return out
	}
	for i := range rng.IntN(5) {
		r := policy.Rule{Tenants: names(polTenants, 0.3), Users: names(polUsers, 0.3), Roles: names(polRoles, 0.3)}
		if rng.IntN(3) > 0 {
			r.Name = fmt.Sprintf("rule-%d", i)
		}
		for range rng.IntN(3) + 1 {
			r.Allow = append(r.Allow, pick(rng, polPatterns))
		}
		if rng.IntN(3) == 0 {
			r.Deny = []string{pick(rng, polPatterns)}
		}
		if rng.IntN(3) == 0 {
			r.Approve = []string{pick(rng, polPatterns)}
		}
		if rng.IntN(6) == 0 {
			r.Allow = nil // a rule that only denies or asks for approvals
		}
		cfg.Rules = append(cfg.Rules, r)
	}
	return cfg
}

// polHarness is the catalog, the executor and the replica of one test, and what they did.
type polHarness struct {
	t     *testing.T
	r     *rig
	dir   string
	ex    *Executor
	cat   *indexer.Catalog
	cl    indexer.Client
	last  uint64 // the registry stream's last sequence the test waited for
	calls atomic.Int64
	cases int
	seen  map[string]int
	fp    int
	// hybrid: the replicas embed with polEmbedder (hybrid search), else lexical.
	hybrid bool
	// history holds every tool the synthetic server listed, with the scope of the last list
	// that held it.
	history map[string]struct{ scope, authContext string }
}

func (h *polHarness) embedder() indexer.Embedder {
	if h.hybrid {
		return polEmbedder{}
	}
	return nil
}

// vectorsDone reports whether every tool of cat has its vector (true without an embedder).
func vectorsDone(cat *indexer.Catalog) bool {
	st := cat.Stats()
	return st.VectorsPending == 0 && (st.Vectors == 0 || st.Vectors == st.Tools)
}

// polEmbedder embeds a text as its character trigrams hashed into 64 dimensions: a
// deterministic model, so that two replicas rank alike.
type polEmbedder struct{}

func (polEmbedder) Name() string { return "trigrams-64" }

func (polEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v := make([]float32, 64)
		r := []rune(strings.ToLower(text))
		for j := 0; j+2 < len(r); j++ {
			hsh := uint32(2166136261)
			for _, c := range r[j : j+3] {
				hsh = (hsh ^ uint32(c)) * 16777619
			}
			v[hsh%64]++
		}
		v[0] += 0.5 // never the zero vector
		out[i] = v
	}
	return out, nil
}

// waitSnapshot waits until server's tools list is on the registry stream.
func (h *polHarness) waitSnapshot(server string) {
	waitFor(h.t, server+" listed", func() bool {
		_, ok := h.snapshot(server)
		return ok
	})
}

// snapshot is server's last tools list on the registry stream.
func (h *polHarness) snapshot(server string) (subjects.Snapshot, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := h.r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		return subjects.Snapshot{}, false
	}
	m, err := st.GetLastMsgForSubject(ctx, subjects.RegistrySnapshot(server, subjects.KindTools))
	if err != nil {
		return subjects.Snapshot{}, false
	}
	var sn subjects.Snapshot
	if json.Unmarshal(m.Data, &sn) != nil {
		h.t.Fatalf("%s: %s", server, m.Data)
	}
	if m.Sequence > h.last {
		h.last = m.Sequence
	}
	return sn, true
}

// publishSynth publishes a new list of the synthetic server: some of its tools, some
// destructive, public or private to someone.
func (h *polHarness) publishSynth(rng *rand.Rand) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	now := time.Now()
	h.fp++
	scope := pick(rng, []struct{ scope, authContext string }{
		{subjects.ScopePublic, ""}, {subjects.ScopePublic, ""}, {"", ""}, {subjects.ScopePrivate, ""},
		{subjects.ScopePrivate, "tenant:acme"}, {subjects.ScopePrivate, "user:zoë"}, {subjects.ScopePrivate, "tenant:ünï/user:zoë"},
		{subjects.ScopePrivate, "tenant:Acme/user:alice"},
	})
	var items []json.RawMessage
	if h.history == nil {
		h.history = map[string]struct{ scope, authContext string }{}
	}
	for _, n := range synthTools {
		if rng.IntN(4) == 0 {
			continue
		}
		h.history[n] = scope
		// Annotations as servers write them: both hints, a read-only tool said destructive too,
		// hints left out, a hint that is not a boolean, none at all.
		ann := pick(rng, []any{
			map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true},
			map[string]bool{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true},
			map[string]bool{"readOnlyHint": true, "destructiveHint": true},
			map[string]bool{"idempotentHint": true}, map[string]any{"destructiveHint": "true", "idempotentHint": true}, nil,
		})
		def, _ := json.Marshal(map[string]any{"name": n, "description": "the " + n + " tool", "inputSchema": map[string]any{"type": "object"}, "annotations": ann})
		items = append(items, def)
	}
	list := toolList(now, synthServer, fmt.Sprint("synth-", h.fp), scope.scope, scope.authContext, items...)
	sn := list.v.(subjects.Snapshot)
	for _, n := range subset(rng, synthRejected, 0.5) {
		sn.Rejected = append(sn.Rejected, subjects.Rejected{Name: n, Code: subjects.CodeInvalidSchema, Message: "its inputSchema is not an object"})
	}
	if rng.IntN(2) == 0 { // a name listed twice: the catalog keeps the first, rejects the other
		sn.Items = append(sn.Items, sn.Items[0])
	}
	list.v = sn
	for _, ev := range []diffEvent{
		{subjects.RegistryStatus(synthServer), subjects.Status{V: 1, Type: subjects.EventStatus, Server: synthServer, Status: subjects.StatusReady, At: now}},
		list,
	} {
		data, _ := json.Marshal(ev.v)
		ack, err := h.r.env.JS.Publish(ctx, ev.subject, data)
		if err != nil {
			h.t.Fatal(err)
		}
		h.last = max(h.last, ack.Sequence)
	}
}

// waitApplied waits until the executor and the replica applied the stream through h.last.
func (h *polHarness) waitApplied() {
	h.t.Helper()
	waitFor(h.t, "executor and catalog caught up", func() bool {
		return h.ex.reg.applied.Load() >= h.last && h.cat.Seq() >= h.last && vectorsDone(h.cat)
	})
}

// synthDispatch dispatches the demo servers' calls to their connectors and answers the
// synthetic server's itself.
type synthDispatch struct {
	h *polHarness
}

func (d synthDispatch) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.h.calls.Add(1)
	if server == synthServer {
		return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)}
	}
	return d.h.r.mgr.Dispatch(ctx, server, req)
}

func (d synthDispatch) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	if server == synthServer {
		return subjects.RelistReply{Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "not in this test"}}
	}
	return d.h.r.mgr.Relist(ctx, server, req)
}

// start runs an executor and a catalog replica (over dir) enforcing pol and waits until both
// applied the registry stream; the function returned stops both.
func (h *polHarness) start(pol *policy.Policy, dir string) (stop func()) {
	t := h.t
	t.Helper()
	ex, err := New(h.r.env.NC, Config{Policy: pol, Dispatcher: synthDispatch{h}, Relister: synthDispatch{h},
		Log: testLogger(t).With().Str("role", "executor").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	edone := make(chan error, 1)
	go func() { edone <- ex.Run(ectx) }()
	cat, err := indexer.Open(indexer.Config{Dir: dir, Policy: pol, GCInterval: -1, Embedder: h.embedder(), Log: testLogger(t).With().Str("role", "indexer").Logger()})
	if err != nil {
		ecancel()
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	cdone := make(chan error, 2)
	go func() { cdone <- cat.Follow(cctx, h.r.env.JS) }()
	go func() { cdone <- cat.Serve(cctx, h.r.env.NC) }()
	h.ex, h.cat, h.cl = ex, cat, indexer.Client{NC: h.r.env.NC, Timeout: waitLimit}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ecancel()
		ccancel()
		for range 2 {
			if err := <-cdone; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
		select {
		case err := <-edone:
			if err != nil {
				t.Errorf("executor Run: %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("executor did not stop")
		}
	}
	t.Cleanup(stop)
	waitFor(t, "executor ready", ex.Ready)
	h.waitApplied()
	waitFor(t, "catalog serving", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_, err := h.cl.Servers(ctx, "local", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "x"}})
		return err == nil
	})
	return stop
}

// polTool is one listed tool as the oracle sees it.
type polTool struct {
	public, server, name string
	scope, authContext   string
}

// listed is every tool of the servers' last lists, from the registry stream.
func (h *polHarness) listed() []polTool {
	var out []polTool
	for _, s := range []string{"ticketing", "logging", "kb", synthServer} {
		sn, ok := h.snapshot(s)
		if !ok {
			h.t.Fatalf("no list of %s", s)
		}
		dup := map[string]bool{}
		for _, it := range sn.Items {
			var d struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(it, &d) != nil {
				h.t.Fatalf("%s: %s", s, it)
			}
			if dup[d.Name] {
				continue // listed twice: the catalog keeps the first
			}
			dup[d.Name] = true
			out = append(out, polTool{public: subjects.PublicName(s, d.Name), server: s, name: d.Name, scope: sn.CacheScope, authContext: sn.AuthContext})
		}
	}
	return out
}

// polAsk is a principal asked as: the subject's tenant, the user and the roles it says.
type polAsk struct {
	tenant, user string
	roles        []string
}

func (h *polHarness) asks(cfg *policy.Config, rng *rand.Rand) []polAsk {
	var out []polAsk
	if cfg != nil {
		for key, pc := range cfg.Principals {
			tenant, user, ok := strings.Cut(key, "/")
			if !ok {
				tenant, user = pc.Tenant, key
				if tenant == "" {
					tenant = "local"
				}
			}
			out = append(out, polAsk{tenant, user, subset(rng, polRoles, 0.3)})
		}
	}
	slices.SortFunc(out, func(a, b polAsk) int { return strings.Compare(a.tenant+"/"+a.user, b.tenant+"/"+b.user) })
	for range 2 {
		out = append(out, polAsk{pick(rng, polTenants), pick(rng, polUsers), subset(rng, polRoles, 0.4)})
	}
	out = append(out, polAsk{"local", "local", nil}, polAsk{pick(rng, polTenants), "", subset(rng, polRoles, 0.4)})
	return out
}

func (h *polHarness) check(phase string, cfg *policy.Config, pol *policy.Policy, rng *rand.Rand) {
	t := h.t
	t.Helper()
	if h.seen == nil {
		h.seen = map[string]int{}
	}
	cfgJSON, _ := json.Marshal(cfg)
	tools := h.listed()
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitLimit)
	defer cancel()
	failed := t.Failed()
	var refs []polRef
	for _, ask := range h.asks(cfg, rng) {
		pr := subjects.Principal{User: ask.user, Roles: ask.roles}
		if rng.IntN(2) == 0 {
			pr.Tenant = ask.tenant
		}
		who := fmt.Sprintf("%s: %s/%s%q", phase, ask.tenant, ask.user, ask.roles)
		rp, rerr := pol.Resolve(subjects.Principal{Tenant: ask.tenant, User: ask.user, Roles: ask.roles})
		known := rerr == nil && rp.Tenant == ask.tenant
		visible := map[string]bool{}
		approval := map[string]bool{}
		for _, tl := range tools {
			h.cases++
			mayUse := known && pol.MayUseScope(rp, tl.scope, tl.authContext)
			var d policy.Decision
			if known {
				h.ex.reg.mu.RLock()
				et := h.ex.reg.tools[tl.public]
				h.ex.reg.mu.RUnlock()
				if et == nil {
					t.Fatalf("%s: the executor holds no %s", who, tl.public)
				}
				d = pol.Decide(rp, policy.Tool{Server: tl.server, Name: tl.name, Destructive: et.Destructive})
			}
			visible[tl.public] = mayUse && d.Allowed
			approval[tl.public] = visible[tl.public] && d.NeedsApproval
			what := fmt.Sprintf("%s: %s (%s/%s, %s %s) policy %s", who, tl.public, tl.server, tl.name, tl.scope, tl.authContext, d.Why)

			// The catalog.
			det, err := h.cl.Details(ctx, ask.tenant, subjects.DetailsRequest{V: 1, Names: []string{tl.public}, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			sel, err := h.cl.Search(ctx, ask.tenant, subjects.SearchRequest{V: 1, Query: indexer.SelectPrefix + tl.public, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !known:
				srv, err := h.cl.Servers(ctx, ask.tenant, subjects.ServersRequest{V: 1, Principal: pr})
				if err != nil {
					t.Fatal(err)
				}
				if det.Error == nil || det.Error.Code != subjects.CodeUnknownPrincipal || sel.Error == nil || sel.Error.Code != subjects.CodeUnknownPrincipal ||
					srv.Error == nil || srv.Error.Code != subjects.CodeUnknownPrincipal || len(srv.Servers) > 0 {
					t.Errorf("%s: not a principal of its tenant: details %+v, select %+v, servers %+v", what, det.Error, sel.Error, srv.Error)
				}
			case visible[tl.public]:
				if det.Error != nil || len(det.Tools) != 1 || det.Tools[0].Name != tl.public {
					t.Errorf("%s: visible, details answered %+v", what, det.Error)
				}
				if sel.Error != nil || len(sel.Tools) != 1 {
					t.Errorf("%s: visible, select: answered %+v %d tools", what, sel.Error, len(sel.Tools))
				} else if got := slices.Contains(sel.Tools[0].Labels, indexer.LabelNeedsApproval); got != approval[tl.public] {
					t.Errorf("%s: select: labels %q, policy needs approval: %v", what, sel.Tools[0].Labels, approval[tl.public])
				}
			default:
				if det.Error == nil || det.Error.Code != subjects.CodeNotFound {
					t.Errorf("%s: hidden, details answered %+v (%d tools)", what, det.Error, len(det.Tools))
				}
				if sel.Error == nil && len(sel.Tools) > 0 {
					t.Errorf("%s: hidden, select: finds it", what)
				}
			}

			// The executor.
			id := fmt.Sprintf("pd-%d-%d", h.cases, time.Now().UnixNano())
			before := h.calls.Load()
			res := h.r.call(ask.tenant, tl.public, `{}`, func(req *subjects.CallRequest) {
				req.ID, req.Principal, req.ApprovalTimeoutMs = id, pr, -1
			})
			code := "ok"
			if res.Error != nil {
				code = res.Error.Code
			}
			h.seen[code]++
			dispatched := h.calls.Load() > before
			var want string
			switch {
			case !known:
				want = subjects.CodeUnknownPrincipal
			case !mayUse:
				want = subjects.CodeNotFound
			case !d.Allowed:
				want = subjects.CodeForbidden
			case d.NeedsApproval && tl.server == synthServer: // (a demo tool's arguments may be refused first)
				want = subjects.CodeNeedsApproval
			}
			switch {
			case want != "" && code != want:
				t.Errorf("%s: executor answered %s %+v, want %s", what, res.Status, res.Error, want)
			case want == "" && slices.Contains([]string{subjects.CodeUnknownPrincipal, subjects.CodeNotFound, subjects.CodeForbidden, subjects.CodeNeedsApproval}, code) &&
				!(code == subjects.CodeNeedsApproval && d.NeedsApproval):
				t.Errorf("%s: executor answered %s %+v, the policy lets it run", what, res.Status, res.Error)
			case want != "" && dispatched:
				t.Errorf("%s: refused %s, yet dispatched", what, code)
			case want == "" && tl.server == synthServer && code != "ok":
				t.Errorf("%s: executor answered %s %+v, want ok", what, res.Status, res.Error)
			}
			// Whatever the oracle says, the two sides agree with each other.
			if known && visible[tl.public] != !slices.Contains([]string{subjects.CodeNotFound, subjects.CodeForbidden}, code) {
				t.Errorf("%s: catalog shows it: %v, executor answered %s", what, visible[tl.public], code)
			}
		}
		if !known {
			continue
		}
		// The synthetic server's tools its last list left out: removed, told so (details'
		// reason, the executor's stale) to whoever could see and call them where they were.
		for n, sc := range h.history {
			pub := subjects.PublicName(synthServer, n)
			if _, listed := visible[pub]; listed {
				continue
			}
			allowed := pol.Decide(rp, policy.Tool{Server: synthServer, Name: n}).Allowed
			mayUse := pol.MayUseScope(rp, sc.scope, sc.authContext)
			what := fmt.Sprintf("%s: removed %s (%s/%s, was %s %s)", who, pub, synthServer, n, sc.scope, sc.authContext)
			det, err := h.cl.Details(ctx, ask.tenant, subjects.DetailsRequest{V: 1, Names: []string{pub}, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			res := h.r.call(ask.tenant, pub, `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
			code := "ok"
			if res.Error != nil {
				code = res.Error.Code
			}
			h.seen["removed "+code]++
			want := subjects.CodeStale
			switch {
			case !mayUse:
				want = subjects.CodeNotFound
			case !allowed:
				want = subjects.CodeForbidden
			}
			if code != want {
				t.Errorf("%s: executor answered %s %+v, want %s", what, res.Status, res.Error, want)
			}
			if det.Error == nil || det.Error.Code != subjects.CodeNotFound || (det.Error.Reason == subjects.StateRemoved) != (mayUse && allowed) {
				t.Errorf("%s: details answered %+v, want not_found, reason removed: %v", what, det.Error, mayUse && allowed)
			}
		}
		// Searches and server counts show nothing details hides.
		ref := polRef{ask: ask, rp: rp, visible: visible, who: who, got: map[string][]subjects.ToolInfo{}, detMsg: map[string]string{}}
		// Names nobody lists, and the hidden ones: the same answer as in a catalog of what the
		// principal may see (suggestions included); the executor suggests only visible names.
		asked := slices.Clone(polNearMisses)
		for _, tl := range tools {
			if !visible[tl.public] {
				asked = append(asked, tl.public)
			}
		}
		for _, n := range asked {
			det, err := h.cl.Details(ctx, ask.tenant, subjects.DetailsRequest{V: 1, Names: []string{n}, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			if det.Error == nil || det.Error.Code != subjects.CodeNotFound {
				t.Errorf("%s: details %s: %+v, want not_found", who, n, det.Error)
				continue
			}
			ref.detMsg[n] = det.Error.Message
		}
		for _, n := range polNearMisses {
			res := h.r.call(ask.tenant, n, `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
			if res.Error == nil || res.Error.Code != subjects.CodeNotFound {
				t.Errorf("%s: call %s: %s %+v, want not_found", who, n, res.Status, res.Error)
				continue
			}
			for _, w := range publicWord.FindAllString(res.Error.Message, -1) {
				if _, listed := visible[w]; listed && w != n && !visible[w] {
					t.Errorf("%s: call %s suggests %s, which it may not see: %s", who, n, w, res.Error.Message)
				}
			}
		}
		for _, q := range polQueries {
			for _, tags := range [][]string{nil, {indexer.LabelNeedsApproval}} {
				rep, err := h.cl.Search(ctx, ask.tenant, subjects.SearchRequest{V: 1, Query: q, K: 100, Principal: pr, Tags: tags, IncludeUnavailable: true})
				if err != nil || rep.Error != nil {
					t.Fatalf("%s: search %q: %v %+v", who, q, err, rep.Error)
				}
				if tags == nil {
					ref.got[q] = rep.Tools
					h.seen["ranking "+rep.Ranking]++
				}
				for _, ti := range rep.Tools {
					if !visible[ti.Name] || tags != nil && !approval[ti.Name] {
						t.Errorf("%s: search %q tags %q shows %s (visible %v, approval %v)", who, q, tags, ti.Name, visible[ti.Name], approval[ti.Name])
					}
				}
			}
		}
		srv, err := h.cl.AllServers(ctx, ask.tenant, subjects.ServersRequest{V: 1, Principal: pr}, 10)
		if err != nil || srv.Error != nil {
			t.Fatalf("%s: servers: %v %+v", who, err, srv.Error)
		}
		count := map[string]int{}
		for _, tl := range tools {
			if visible[tl.public] {
				count[tl.server]++
			}
		}
		for _, s := range srv.Servers {
			for _, rj := range s.Rejected {
				if rj.Kind != subjects.KindTools {
					continue
				}
				if pol.IsOpen() {
					continue
				}
				sn, _ := h.snapshot(s.Name)
				if !pol.MayUseScope(rp, sn.CacheScope, sn.AuthContext) || !pol.Decide(rp, policy.Tool{Server: s.Name, Name: rj.Name}).Allowed {
					t.Errorf("%s: servers shows %s's rejected tool %q (%s), the policy hides it", who, s.Name, rj.Name, rj.Code)
				}
				h.seen["rejected shown"]++
			}
			if count[s.Name] == 0 {
				// Under a configured policy a server none of whose tools the principal may
				// call is not listed; under any, one whose list it may not see (README).
				sn, _ := h.snapshot(s.Name)
				if !pol.IsOpen() || !pol.MayUseScope(rp, sn.CacheScope, sn.AuthContext) {
					t.Errorf("%s: servers lists %s, none of whose tools the principal may see", who, s.Name)
				}
			}
			if s.Tools != count[s.Name] {
				t.Errorf("%s: servers counts %d tools of %s, the policy shows %d", who, s.Tools, s.Name, count[s.Name])
			}
			delete(count, s.Name)
		}
		for s, n := range count {
			t.Errorf("%s: servers leaves out %s, whose %d tools the policy shows", who, s, n)
		}
		refs = append(refs, ref)
	}
	h.checkScores(refs)
	if !failed && t.Failed() {
		t.Logf("%s: policy %s", phase, cfgJSON)
	}
}

var polQueries = []string{"read résumé 写入 del all get x", "issue logs document search", "get list close assign tail summarize"}

// polRef is what a principal's searches found, and what it may see.
type polRef struct {
	ask     polAsk
	rp      subjects.Principal
	visible map[string]bool
	who     string
	got     map[string][]subjects.ToolInfo // by query
	detMsg  map[string]string              // details' not_found message by name
}

// polNearMisses are names nobody lists, near listed ones.
var polNearMisses = []string{"kb__get_documnt", "logging__getlogs", "ticketing__closeissue", "kb__summarize",
	"logging__getLog", "nosuch__getLogs", subjects.PublicName(synthServer, "reed"), synthServer + "__Read", subjects.PublicName(synthServer, "resume")}

// checkScores compares every search of refs with the same search in a catalog that shows each
// principal exactly what it may see, by a policy of one rule per principal (README: a search
// ranks and scores exactly as it would in a catalog holding only the tools the principal may
// see).
func (h *polHarness) checkScores(refs []polRef) {
	t := h.t
	t.Helper()
	cfg := &policy.Config{Rules: []policy.Rule{}}
	for i, ref := range refs {
		r := policy.Rule{Name: fmt.Sprint("ref-", i), Tenants: []string{ref.rp.Tenant}, Users: []string{ref.rp.User}, Roles: []string{fmt.Sprint("ref-", i)}}
		for _, tl := range h.listed() {
			if ref.visible[tl.public] {
				r.Allow = append(r.Allow, tl.server+"__"+tl.name)
			}
		}
		if len(r.Allow) > 0 {
			cfg.Rules = append(cfg.Rules, r)
		}
	}
	cat, err := indexer.Open(indexer.Config{InMemory: true, Policy: mustPolicy(t, cfg), Embedder: h.embedder(), Log: testLogger(t).With().Str("role", "reference").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cat.Follow(ctx, h.r.env.JS) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reference catalog: %v", err)
		}
	}()
	waitFor(t, "reference catalog caught up", func() bool { return cat.Seq() >= h.last && cat.Ready() && vectorsDone(cat) })
	for i, ref := range refs {
		for _, q := range polQueries {
			want := cat.Search(ctx, subjects.SearchRequest{V: 1, Query: q, K: 100, IncludeUnavailable: true,
				Principal: subjects.Principal{Tenant: ref.rp.Tenant, User: ref.rp.User, Roles: []string{fmt.Sprint("ref-", i)}}})
			if want.Error != nil {
				t.Fatalf("reference search: %+v", want.Error)
			}
			if a, b := rankOf(ref.got[q]), rankOf(want.Tools); a != b {
				t.Errorf("%s: search %q:\n got %s\nwant %s (a catalog of what it may see)", ref.who, q, a, b)
			}
		}
		for n, msg := range ref.detMsg {
			want := cat.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{n},
				Principal: subjects.Principal{Tenant: ref.rp.Tenant, User: ref.rp.User, Roles: []string{fmt.Sprint("ref-", i)}}})
			if want.Error == nil || want.Error.Message != msg {
				t.Errorf("%s: details %s: %q; a catalog of what it may see answers %+v", ref.who, n, msg, want.Error)
			}
		}
	}
}

func rankOf(tools []subjects.ToolInfo) string {
	var b strings.Builder
	for _, ti := range tools {
		fmt.Fprintf(&b, "%s=%v ", ti.Name, ti.Score)
	}
	return b.String()
}

// waitingCall is a call waiting for approval, and its answer once it comes.
type waitingCall struct {
	ask    polAsk
	tool   polTool
	id     string
	answer chan subjects.CallResult
}

// startWaitingCall starts a call of a synthetic tool that pol lets a principal call once
// approved, and waits until it waits for the approval (nil when pol has no such pair).
func (h *polHarness) startWaitingCall(cfg *policy.Config, pol *policy.Policy, rng *rand.Rand) *waitingCall {
	t := h.t
	t.Helper()
	for _, ask := range h.asks(cfg, rng) {
		rp, err := pol.Resolve(subjects.Principal{Tenant: ask.tenant, User: ask.user, Roles: ask.roles})
		if err != nil || rp.Tenant != ask.tenant {
			continue
		}
		for _, tl := range h.listed() {
			if tl.server != synthServer || !pol.MayUseScope(rp, tl.scope, tl.authContext) {
				continue
			}
			h.ex.reg.mu.RLock()
			et := h.ex.reg.tools[tl.public]
			h.ex.reg.mu.RUnlock()
			if d := pol.Decide(rp, policy.Tool{Server: tl.server, Name: tl.name, Destructive: et.Destructive}); !d.Allowed || !d.NeedsApproval {
				continue
			}
			w := &waitingCall{ask: ask, tool: tl, id: fmt.Sprintf("pd-wait-%d", time.Now().UnixNano()), answer: make(chan subjects.CallResult, 1)}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
				defer cancel()
				res, err := h.r.client.Call(ctx, ask.tenant, subjects.CallRequest{ID: w.id, Tool: tl.public, Arguments: json.RawMessage(`{}`),
					Principal: subjects.Principal{User: ask.user, Roles: ask.roles}, ApprovalTimeoutMs: 2 * waitLimit.Milliseconds()})
				if err != nil {
					res = subjects.CallResult{Status: "client error", Error: &subjects.Error{Message: err.Error()}}
				}
				w.answer <- res
			}()
			ex := h.ex
			waitFor(t, "the call waiting for approval", func() bool { return len(ex.approvalWaits) == 1 })
			h.seen["handed back"]++
			return w
		}
	}
	return nil
}

// finishWaitingCall checks what the executor now running (pol's) answers w: what pol decides,
// approving it when pol wants an approval too.
func (h *polHarness) finishWaitingCall(w *waitingCall, pol *policy.Policy) {
	t := h.t
	t.Helper()
	what := fmt.Sprintf("call %s of %s by %s/%s%q, handed to the new executor", w.id, w.tool.public, w.ask.tenant, w.ask.user, w.ask.roles)
	rp, err := pol.Resolve(subjects.Principal{Tenant: w.ask.tenant, User: w.ask.user, Roles: w.ask.roles})
	known := err == nil && rp.Tenant == w.ask.tenant
	var d policy.Decision
	if known {
		d = pol.Decide(rp, policy.Tool{Server: synthServer, Name: w.tool.name, Destructive: h.ex.reg.tools[w.tool.public].Destructive})
	}
	want := "ok"
	switch {
	case !known:
		want = subjects.CodeUnknownPrincipal
	case !pol.MayUseScope(rp, w.tool.scope, w.tool.authContext):
		want = subjects.CodeNotFound
	case !d.Allowed:
		want = subjects.CodeForbidden
	case d.NeedsApproval:
		// (Until it waits again, and subscribes to its approvals: no responders before.)
		waitFor(t, "the call waiting for approval again", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			rep, err := h.r.client.Decide(ctx, subjects.Approval{V: 1, ID: w.id, Approve: true, Tenant: w.ask.tenant, By: "test"})
			if err != nil && !errors.Is(err, ErrNoWaiter) || err == nil && !rep.OK {
				t.Fatalf("%s: approve: %v %+v", what, err, rep)
			}
			return err == nil
		})
	}
	var res subjects.CallResult
	select {
	case res = <-w.answer:
	case <-time.After(2 * waitLimit):
		t.Fatalf("%s: no answer", what)
	}
	code := "ok"
	if res.Error != nil {
		code = res.Error.Code
	}
	if code != want {
		t.Errorf("%s: %s %+v, want %s (%s)", what, res.Status, res.Error, want, d.Why)
	}
}
