package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// The catalog and the executor apply one policy and one cache-scope rule: a tool is shown to a
// principal (search, details, a server's count, a suggestion) exactly when the executor lets it
// call it, and a tool the catalog hides is not_found or forbidden to a call, never told
// otherwise. TestCatalogExecutorAgree checks it on random (seeded, bounded) combinations of a
// policy (none, rules only, listed principals, an empty one), lists of several servers (plain,
// encoded and case-twin names; public and private lists of several authorization contexts;
// re-lists that remove tools; servers down, changing or revoked) and principals, through the
// real paths: an embedded NATS, the registry stream, an executor and a catalog replica served
// on NATS. Every tool's schema wants an argument the calls leave out: a call the executor lets
// through authorization and freshness ends invalid_arguments, and nothing runs.

// diffServers are the servers and tool names the scenarios draw from: plain names, names that
// differ only by case, a server name with '_' (plain) and names that must be encoded.
var diffServers = []struct {
	name  string
	tools []string
}{
	{"vault", []string{"read", "Read", "del_all", "rotate-keys"}},
	{"kb", []string{"search", "read", "_hidden"}},
	{"Kb", []string{"search"}},
	{"files_x", []string{"ls", "rm"}},
	{"odd srv", []string{"a b", "list", "x.y"}},
}

var diffPatterns = []string{
	"*", "*__*", "vault__*", "vault__read", "vault__Read", "vault__r*", "kb__*", "Kb__*", "*__read",
	"files_x__*", "files_x__rm", "odd srv__*", "odd*", "odd srv__a b", "*__list", "kb___hidden",
	"*hidden", "odd_srv___a_b*", "*__search",
}

var diffScopes = []struct{ scope, authContext string }{
	{"", ""}, {subjects.ScopePublic, ""}, {subjects.ScopePublic, ""},
	{subjects.ScopePrivate, ""}, {subjects.ScopePrivate, "tenant:acme"}, {subjects.ScopePrivate, "user:alice"},
	{subjects.ScopePrivate, "tenant:acme/user:alice"}, {subjects.ScopePrivate, "tenant:beta"},
}

// diffPrincipals are who the scenarios ask as: the tenant of the subjects, and the principal.
var diffPrincipals = []subjects.Principal{
	{Tenant: "local", User: "local"},
	{Tenant: "acme", User: "alice"},
	{Tenant: "acme", User: "bob"},
	{Tenant: "beta", User: "alice"},
	{Tenant: "beta", User: "mallory"},
	{Tenant: "local", User: "alice"},
	{Tenant: "beta", User: "bob"},
	{Tenant: "local", User: "bob"},
	{Tenant: "local", User: "mallory"},
}

type diffScenario struct {
	policy *policy.Config // nil: open
	events []diffEvent
	// pairs maps every public name ever listed to its (server, tool); listed holds those of
	// the servers' last lists, with those lists' scopes.
	pairs  map[string][2]string
	listed map[string]struct{ scope, authContext string }
	names  []string // what the probes ask for: public names, near misses, unknown names
	asks   []subjects.Principal
	// withTenant: the requests' principals name their tenant (the subject's), else they leave
	// it out.
	withTenant bool
	text       []string // a description, for failures
}

func pick[T any](rng *rand.Rand, from []T) T { return from[rng.IntN(len(from))] }

func subset[T any](rng *rand.Rand, from []T, p float64) []T {
	var out []T
	for _, x := range from {
		if rng.Float64() < p {
			out = append(out, x)
		}
	}
	return out
}

func genScenario(rng *rand.Rand) *diffScenario {
	sc := &diffScenario{pairs: map[string][2]string{}, listed: map[string]struct{ scope, authContext string }{}}
	add := func(subject string, v any) {
		sc.events = append(sc.events, diffEvent{subject, v})
	}
	// The policy.
	switch mode := rng.IntN(5); mode {
	case 0:
		sc.text = append(sc.text, "policy: open")
	default:
		cfg := &policy.Config{}
		if mode >= 3 {
			cfg.Principals = map[string]policy.PrincipalConfig{
				"alice":      {Tenant: "acme", Roles: subset(rng, []string{"admin", "support"}, 0.5)},
				"beta/alice": {Roles: subset(rng, []string{"admin", "support"}, 0.5)},
				"bob":        {Tenant: "acme", Roles: subset(rng, []string{"admin", "support"}, 0.5)},
				"mallory":    {Tenant: "beta", Roles: subset(rng, []string{"admin", "support"}, 0.5)},
				"local":      {},
			}
		}
		if mode != 1 { // mode 1: a policy section without rules (everything denied)
			for range 1 + rng.IntN(4) {
				r := policy.Rule{
					Tenants: subset(rng, []string{"acme", "beta", "local", "*"}, 0.25),
					Users:   subset(rng, []string{"alice", "bob", "local", "*"}, 0.2),
					Roles:   subset(rng, []string{"admin", "support"}, 0.2),
				}
				for range 1 + rng.IntN(3) {
					r.Allow = append(r.Allow, pick(rng, diffPatterns))
				}
				if rng.IntN(3) == 0 {
					r.Deny = []string{pick(rng, diffPatterns)}
				}
				cfg.Rules = append(cfg.Rules, r)
			}
		}
		sc.policy = cfg
		b, _ := json.Marshal(cfg)
		sc.text = append(sc.text, "policy: "+string(b))
	}
	// The lists.
	now := time.Now()
	for _, s := range diffServers {
		add(subjects.RegistryStatus(s.name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: subjects.StatusReady, At: now})
		var last []string
		var scope struct{ scope, authContext string }
		for k := range 1 + rng.IntN(3) {
			last = subset(rng, s.tools, 0.7)
			scope = pick(rng, diffScopes)
			items := []json.RawMessage{}
			for _, n := range last {
				destructive := rng.IntN(3) == 0
				items = append(items, json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"%s of %s","inputSchema":{"type":"object","required":["x"],"properties":{"x":{"type":"string"}}},"annotations":{"destructiveHint":%t}}`,
					n, n, s.name, destructive)))
				sc.pairs[subjects.PublicName(s.name, n)] = [2]string{s.name, n}
			}
			add(subjects.RegistrySnapshot(s.name, subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: s.name, Kind: subjects.KindTools,
				Fingerprint: fmt.Sprintf("f%d-%s", k, s.name), ListedAt: now, Pages: 1, CacheScope: scope.scope, AuthContext: scope.authContext, Items: items})
			sc.text = append(sc.text, fmt.Sprintf("%s lists %q (%s %s)", s.name, last, scope.scope, scope.authContext))
		}
		for _, n := range last {
			sc.listed[subjects.PublicName(s.name, n)] = scope
		}
		switch rng.IntN(10) {
		case 0:
			add(subjects.RegistryStatus(s.name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: subjects.StatusUnavailable,
				Code: subjects.CodeConnectionLost, Reason: "db.internal refused the connection", At: now})
			sc.text = append(sc.text, s.name+" is unavailable")
		case 1:
			add(subjects.RegistryChanged(s.name, subjects.KindTools), subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: s.name, Kind: subjects.KindTools, At: now})
			sc.text = append(sc.text, s.name+" announced list_changed")
		case 2:
			n := pick(rng, s.tools)
			add(subjects.RegistryRevoked(s.name), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: s.name, Tools: []string{n}, At: now})
			sc.text = append(sc.text, fmt.Sprintf("%s: %q revoked", s.name, n))
		case 3:
			add(subjects.RegistryRevoked(s.name), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: s.name, Tools: []string{"*"}, At: now})
			sc.text = append(sc.text, s.name+": every tool revoked")
		case 4:
			add(subjects.RegistryStatus(s.name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: s.name, Status: subjects.StatusRemoved, At: now})
			sc.text = append(sc.text, s.name+" is removed")
		}
	}
	// What is asked, and by whom.
	for pub := range sc.pairs {
		sc.names = append(sc.names, pub)
	}
	slices.Sort(sc.names)
	sc.names = append(sc.names, "vault__reed", "vault__nosuch", "kb__serch", "nosrv__read", "files_x__lss", "odd_srv___list")
	sc.withTenant = rng.IntN(2) == 0
	perm := rng.Perm(len(diffPrincipals))
	for _, i := range perm[:4] {
		p := diffPrincipals[i]
		if sc.policy == nil || len(sc.policy.Principals) == 0 {
			p.Roles = subset(rng, []string{"admin", "support"}, 0.4)
		}
		sc.asks = append(sc.asks, p)
	}
	return sc
}

// noDispatch fails the test: no call of the scenarios may get past its arguments.
type noDispatch struct{ t testing.TB }

func (d noDispatch) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	d.t.Errorf("a call was dispatched")
	return subjects.DispatchReply{Error: &subjects.Error{Code: subjects.CodeInternal, Message: "not in this test"}}
}

func (d noDispatch) Relist(context.Context, string, subjects.RelistRequest) subjects.RelistReply {
	return subjects.RelistReply{Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "not in this test"}}
}

var publicWord = regexp.MustCompile(`[A-Za-z0-9_-]+`)

func TestCatalogExecutorAgree(t *testing.T) {
	scenarios := 10
	if testing.Short() {
		scenarios = 3
	}
	rng := rand.New(rand.NewPCG(20261202, 7))
	for i := range scenarios {
		sc := genScenario(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if failed := runDiffScenario(t, sc); failed {
				t.Logf("scenario:\n  %s", strings.Join(sc.text, "\n  "))
			}
		})
	}
}

// diffEvent is a registry event to publish: its subject and payload.
type diffEvent struct {
	subject string
	v       any
}

// xTool is a definition of a tool named n whose inputSchema requires "x": a call without it is
// refused invalid_arguments, after every check that tells whether the tool may be called, and
// nothing is dispatched.
func xTool(n string) json.RawMessage {
	return json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object","required":["x"]}}`)
}

// agreeCase is a call of tool by a principal of tenant (user "u", no arguments) and what the
// executor answers it (want: an error code) and the catalog's details of it say: not_found,
// with reason removed or not, or the tool shown where want is invalid_arguments.
type agreeCase struct {
	tenant, tool string
	want         string
	removed      bool
}

// checkAgree runs cases through r's executor and cl's catalog (see agreeCase). A not_found
// call never says that the tool is no longer listed: that tells the principal it was.
func checkAgree(t *testing.T, r *rig, cl indexer.Client, cases []agreeCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, c := range cases {
		pr := subjects.Principal{User: "u"}
		res := r.call(c.tenant, c.tool, `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
		if res.Error == nil || res.Error.Code != c.want || c.want == subjects.CodeNotFound && strings.Contains(res.Error.Message, "no longer listed") {
			t.Errorf("%s calls %.40s: got %s %+v, want %s", c.tenant, c.tool, res.Status, res.Error, c.want)
		}
		det, err := cl.Details(ctx, c.tenant, subjects.DetailsRequest{V: 1, Names: []string{c.tool}, Principal: pr})
		if err != nil {
			t.Fatal(err)
		}
		if c.want == subjects.CodeInvalidArguments {
			if det.Error != nil {
				t.Errorf("%s: details %.40s: %+v, want it shown", c.tenant, c.tool, det.Error)
			}
			continue
		}
		if det.Error == nil || det.Error.Code != subjects.CodeNotFound || (det.Error.Reason == subjects.StateRemoved) != c.removed {
			t.Errorf("%s: details %.40s: %+v, want not_found, removed: %v", c.tenant, c.tool, det.Error, c.removed)
		}
	}
}

// toolList is a one-page snapshot of server's tools, listed at at.
func toolList(at time.Time, server, fp, scope, authContext string, items ...json.RawMessage) diffEvent {
	sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools, Fingerprint: fp, ListedAt: at, Pages: 1,
		CacheScope: scope, AuthContext: authContext, Items: append([]json.RawMessage{}, items...)}
	return diffEvent{subjects.RegistrySnapshot(server, subjects.KindTools), sn}
}

// startBoth publishes events on a new embedded NATS, then starts an executor and a catalog
// replica served on NATS, both enforcing pol, and waits until both applied the events.
func startBoth(t *testing.T, pol *policy.Policy, events []diffEvent) (*rig, *Executor, indexer.Client) {
	t.Helper()
	return startBothRemembering(t, pol, events, 0)
}

// startBothRemembering is startBoth with the bound on the removed tool names the executor
// remembers a server, and the catalog in all, at maxRemoved instead of their defaults (0; both
// staleness.MaxRemembered).
func startBothRemembering(t *testing.T, pol *policy.Policy, events []diffEvent, maxRemoved int) (*rig, *Executor, indexer.Client) {
	t.Helper()
	env := startNATS(t, natsembed.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var last uint64
	for _, ev := range events {
		data, _ := json.Marshal(ev.v)
		ack, err := env.JS.Publish(ctx, ev.subject, data)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	r := &rig{t: t, env: env, control: map[string]string{}, dir: t.TempDir(), client: Client{NC: env.NC, JS: env.JS}}
	ex := r.startExecutor(Config{Policy: pol, Dispatcher: noDispatch{t}, Relister: noDispatch{t}, hooks: testHooks{maxRemembered: maxRemoved}}, env.NC) // ready: replayed
	cat, err := indexer.Open(indexer.Config{InMemory: true, Policy: pol, MaxRemoved: maxRemoved, Log: testLogger(t).With().Str("role", "indexer").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { errc <- cat.Follow(cctx, env.JS) }()
	go func() { errc <- cat.Serve(cctx, env.NC) }()
	t.Cleanup(func() {
		ccancel()
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
	})
	cl := indexer.Client{NC: env.NC, Timeout: waitLimit}
	waitFor(t, "catalog serving", func() bool {
		if cat.Seq() < last {
			return false
		}
		_, err := cl.Servers(ctx, "local", subjects.ServersRequest{V: 1})
		return err == nil
	})
	return r, ex, cl
}

func runDiffScenario(t *testing.T, sc *diffScenario) bool {
	pol, err := policy.New(sc.policy)
	if err != nil {
		t.Fatal(err)
	}
	r, ex, cl := startBoth(t, pol, sc.events)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()

	for _, ask := range sc.asks {
		tenant := ask.Tenant
		pr := subjects.Principal{User: ask.User, Roles: ask.Roles}
		if sc.withTenant {
			pr.Tenant = tenant
		}
		who := fmt.Sprintf("%s/%s%q", tenant, ask.User, ask.Roles)
		rp, rerr := pol.Resolve(subjects.Principal{Tenant: tenant, User: ask.User, Roles: ask.Roles})
		known := rerr == nil && rp.Tenant == tenant

		// What the catalog shows: details (any state), select (what a call would take).
		visible, usable, removed := map[string]bool{}, map[string]bool{}, map[string]bool{}
		detailsMsg := map[string]string{}
		for _, n := range sc.names {
			det, err := cl.Details(ctx, tenant, subjects.DetailsRequest{V: 1, Names: []string{n}, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			sel, err := cl.Search(ctx, tenant, subjects.SearchRequest{V: 1, Query: indexer.SelectPrefix + n, Principal: pr})
			if err != nil {
				t.Fatal(err)
			}
			if !known {
				for _, e := range []*subjects.Error{det.Error, sel.Error} {
					if e == nil || e.Code != subjects.CodeUnknownPrincipal {
						t.Errorf("%s is no principal of %s: catalog answered %+v", who, tenant, e)
					}
				}
				continue
			}
			visible[n] = det.Error == nil && len(det.Tools) == 1 && det.Tools[0].Name == n
			usable[n] = sel.Error == nil && len(sel.Tools) == 1 && sel.Tools[0].Name == n
			removed[n] = det.Error != nil && det.Error.Code == subjects.CodeNotFound && det.Error.Reason == subjects.StateRemoved
			if det.Error != nil {
				if det.Error.Code != subjects.CodeNotFound {
					t.Errorf("%s: details %s: %+v", who, n, det.Error)
				}
				detailsMsg[n] = det.Error.Message
			}
			if usable[n] && !visible[n] {
				t.Errorf("%s: select:%s finds it, details does not", who, n)
			}
		}

		// Every name either side suggests is one the principal may call now.
		checkHints := func(side, n, msg string) {
			for _, w := range publicWord.FindAllString(msg, -1) {
				if _, ok := sc.pairs[w]; ok && w != n && !usable[w] {
					t.Errorf("%s: %s's answer for %s names %s, which select: does not find: %s", who, side, n, w, msg)
				}
			}
		}

		// What the executor does with a call of each name.
		for _, n := range sc.names {
			res := r.call(tenant, n, `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
			code := "ok"
			if res.Error != nil {
				code = res.Error.Code
			}
			if !known {
				if code != subjects.CodeUnknownPrincipal {
					t.Errorf("%s is no principal of %s: executor answered %s %+v", who, tenant, res.Status, res.Error)
				}
				continue
			}
			pair, isTool := sc.pairs[n]
			switch code {
			case subjects.CodeInvalidArguments: // authorized, fresh: a call would run
				if !usable[n] {
					t.Errorf("%s: executor lets %s run (invalid_arguments: it got that far), catalog select: hides it (details: %v)", who, n, visible[n])
				}
			case subjects.CodeStale, subjects.CodeUnavailable:
				gone := isTool && ex.reg.view.Tool(pair[0], pair[1]).State == staleness.Removed
				if _, listed := sc.listed[n]; !listed {
					gone = true // revoked after it was removed: the catalog keeps it as removed
				}
				switch {
				case gone && !removed[n]:
					t.Errorf("%s: executor says %s is %s (%s), catalog details does not say it was removed: %q", who, n, code, res.Error.Message, detailsMsg[n])
				case !gone && (!visible[n] || usable[n]):
					t.Errorf("%s: executor says %s is %s (%s), catalog details shows it %v, select: %v", who, n, code, res.Error.Message, visible[n], usable[n])
				}
			case subjects.CodeNotFound, subjects.CodeForbidden:
				if visible[n] || removed[n] {
					t.Errorf("%s: executor answers %s %s (%s), catalog details shows it (removed: %v)", who, n, code, res.Error.Message, removed[n])
				}
				checkHints("executor", n, res.Error.Message)
			default:
				t.Errorf("%s: call %s: unexpected %s %+v", who, n, res.Status, res.Error)
			}
			if removed[n] && code != subjects.CodeStale {
				t.Errorf("%s: catalog says %s was removed, executor answers %s", who, n, code)
			}
			if visible[n] && code != subjects.CodeInvalidArguments && code != subjects.CodeStale && code != subjects.CodeUnavailable {
				t.Errorf("%s: catalog shows %s, executor answers %s", who, n, code)
			}
			checkHints("catalog details", n, detailsMsg[n])
			// The policy decides on the original names, for both.
			if scope, listed := sc.listed[n]; listed && pol.MayUseScope(rp, scope.scope, scope.authContext) {
				allowed := pol.Decide(rp, policy.Tool{Server: pair[0], Name: pair[1]}).Allowed
				if allowed == (code == subjects.CodeForbidden) || code == subjects.CodeNotFound {
					t.Errorf("%s: %s (%s/%s) in a list it may see, policy allows: %v; executor answers %s", who, n, pair[0], pair[1], allowed, code)
				}
			} else if listed && code != subjects.CodeNotFound {
				t.Errorf("%s: %s is in a list private to %s, executor answers %s", who, n, scope.authContext, code)
			}
		}
		// A principal of another tenant than the subject's is refused alike.
		other := subjects.Principal{Tenant: tenant + "x", User: ask.User, Roles: ask.Roles}
		det, err := cl.Details(ctx, tenant, subjects.DetailsRequest{V: 1, Names: []string{sc.names[0]}, Principal: other})
		if err != nil {
			t.Fatal(err)
		}
		res := r.call(tenant, sc.names[0], `{}`, func(req *subjects.CallRequest) { req.Principal = other })
		if det.Error == nil || res.Error == nil || det.Error.Code != subjects.CodeBadRequest || res.Error.Code != det.Error.Code {
			t.Errorf("%s as of tenant %sx: catalog %+v, executor %+v, want bad_request from both", who, tenant, det.Error, res.Error)
		}
		if !known {
			continue
		}

		// A search shows only what select: finds; a server's count is what details shows.
		for _, q := range []string{"read", "search list", "a b x.y hidden", "vault kb files odd"} {
			rep, err := cl.Search(ctx, tenant, subjects.SearchRequest{V: 1, Query: q, K: 50, Principal: pr, IncludeUnavailable: true})
			if err != nil || rep.Error != nil {
				t.Fatalf("search %q: %v %+v", q, err, rep.Error)
			}
			for _, ti := range rep.Tools {
				if !visible[ti.Name] || ti.State == string(staleness.Fresh) && !usable[ti.Name] {
					t.Errorf("%s: search %q shows %s (%s), details %v, select: %v", who, q, ti.Name, ti.State, visible[ti.Name], usable[ti.Name])
				}
			}
		}
		srv, err := cl.AllServers(ctx, tenant, subjects.ServersRequest{V: 1, Principal: pr}, 10)
		if err != nil || srv.Error != nil {
			t.Fatalf("servers: %v %+v", err, srv.Error)
		}
		count := map[string]int{}
		for n, ok := range visible {
			if ok {
				count[sc.pairs[n][0]]++
			}
		}
		for _, s := range srv.Servers {
			if s.Tools != count[s.Name] {
				t.Errorf("%s: servers counts %d tools of %s, details shows %d", who, s.Tools, s.Name, count[s.Name])
			}
			delete(count, s.Name)
		}
		for s, n := range count {
			t.Errorf("%s: servers does not list %s, details shows %d of its tools", who, s, n)
		}
	}
	return t.Failed()
}
