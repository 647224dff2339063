package indexer

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// The seeded search differential: catalogs built from the real evaluation catalog
// (testdata/eval/retrieval) with random variations (subsets, renamed servers and tools that need
// the public-name encoding, Chinese text, annotations, private lists, revocations, unavailable
// servers, policies with tool patterns) are applied through the registry-event path, and
// searches that must agree are compared (see TestSearchDifferential).

// sdServer is one server of a generated catalog.
type sdServer struct {
	name, desc  string
	scope, auth string
	items       []json.RawMessage
	tools       []string // original names, as items
	revoked     []string
	unavailable bool
}

// sdCatalog is a generated catalog and the policy it is searched under (nil: open).
type sdCatalog struct {
	servers []*sdServer
	pol     *policy.Config
}

var sdChinese = []string{"搜索新闻和网页内容", "获取天气预报", "创建电子表格并写入数据", "翻译文本", "下载文件", "查询股票价格", "发送电子邮件"}

func sdCamel(s string) string {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' })
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// genSearchCatalog returns a random catalog of seed.
func genSearchCatalog(tb testing.TB, seed uint64) *sdCatalog {
	all := readLines[benchTool](tb, "tools.jsonl")
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var order []string
	byServer := map[string][]benchTool{}
	for _, t := range all {
		if byServer[t.Server] == nil {
			order = append(order, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	keepServer := sdKeepServers * (0.4 + 0.6*rng.Float64())
	cat := &sdCatalog{}
	used := map[string]bool{}
	for _, sname := range order {
		if rng.Float64() > keepServer {
			continue
		}
		ts := byServer[sname]
		s := &sdServer{name: sname, desc: ts[0].ServerDescription}
		switch p := rng.IntN(20); {
		case p == 0:
			s.name = strings.ReplaceAll(sname, "-", " ") + " Server" // encoded public names
		case p == 1:
			s.name = sname + ".io"
		case p == 2:
			s.desc += " " + sdChinese[rng.IntN(len(sdChinese))]
		}
		if used[s.name] {
			s.name = sname
		}
		used[s.name] = true
		if rng.IntN(7) == 0 {
			s.scope = subjects.ScopePrivate
			s.auth = []string{"", "tenant:acme", "user:bob", "tenant:acme/user:alice"}[rng.IntN(4)]
		}
		seen := map[string]bool{}
		for _, t := range ts {
			if rng.IntN(5) == 0 {
				continue
			}
			name := t.Name
			switch p := rng.IntN(20); {
			case p == 0:
				name = sdCamel(name)
			case p == 1:
				name = strings.ReplaceAll(name, "_", " ")
			case p == 2:
				name = "_" + name
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			desc := t.Description
			if rng.IntN(12) == 0 {
				desc += " " + sdChinese[rng.IntN(len(sdChinese))]
			}
			def := map[string]any{"name": name, "description": desc, "inputSchema": t.InputSchema}
			if rng.IntN(3) == 0 {
				ann := map[string]any{}
				for _, h := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
					if x := rng.IntN(3); x < 2 {
						ann[h] = x == 0
					}
				}
				def["annotations"] = ann
			}
			if rng.IntN(15) == 0 {
				def["title"] = strings.ToUpper(name[:1]) + strings.ReplaceAll(name[1:], "_", " ")
			}
			b, err := json.Marshal(def)
			if err != nil {
				tb.Fatal(err)
			}
			s.items = append(s.items, b)
			s.tools = append(s.tools, name)
		}
		if len(s.tools) > 1 && rng.IntN(10) == 0 {
			s.revoked = []string{s.tools[rng.IntN(len(s.tools))]}
		}
		s.unavailable = rng.IntN(15) == 0
		cat.servers = append(cat.servers, s)
	}
	if rng.IntN(2) == 0 {
		pick := func() string { return cat.servers[rng.IntN(len(cat.servers))].name }
		cat.pol = &policy.Config{
			Principals: map[string]policy.PrincipalConfig{
				"local": {Roles: []string{"admin"}},
				"alice": {Tenant: "acme", Roles: []string{"support"}},
				"bob":   {Tenant: "beta", Roles: []string{"ops"}},
			},
			Rules: []policy.Rule{
				{Name: "admin", Roles: []string{"admin"}, Allow: []string{"*"}},
				{Name: "support", Roles: []string{"support"}, Allow: []string{pick() + "__*", pick() + "__*", "*__get*", "*__search*"}, Deny: []string{"*__*delete*"}},
				{Name: "ops", Roles: []string{"ops"}, Allow: []string{"*"}, Deny: []string{pick() + "__*", "*__*_file*"}, Approve: []string{"*__create*"}},
			},
		}
	}
	return cat
}

// events returns the registry events of cat: the servers in a random order of rng (nil: as
// generated), each server's list permuted too, and only the tools keep accepts (nil: all; a
// server with none left is left out).
func (cat *sdCatalog) events(rng *rand.Rand, keep func(server, tool string) bool) []any {
	srvs := slices.Clone(cat.servers)
	if rng != nil {
		rng.Shuffle(len(srvs), func(i, j int) { srvs[i], srvs[j] = srvs[j], srvs[i] })
	}
	var evs []any
	for _, s := range srvs {
		idx := make([]int, len(s.items))
		for i := range idx {
			idx[i] = i
		}
		if rng != nil {
			rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		}
		var items []json.RawMessage
		for _, i := range idx {
			if keep == nil || keep(s.name, s.tools[i]) {
				items = append(items, s.items[i])
			}
		}
		if len(items) == 0 {
			continue
		}
		sn := snapshot(s.name, s.desc, items...)
		sn.CacheScope, sn.AuthContext = s.scope, s.auth
		evs = append(evs, status(s.name, subjects.StatusReady), sn)
		if len(s.revoked) > 0 {
			evs = append(evs, revoke(s.name, s.revoked, nil))
		}
		if s.unavailable {
			evs = append(evs, status(s.name, subjects.StatusUnavailable))
		}
	}
	return evs
}

// earlier returns the events of a history before cat's: earlier lists of some of its servers
// (a part of their tools, other descriptions and scopes), and a server that is removed at the
// end (see gone).
func (cat *sdCatalog) earlier(rng *rand.Rand) []any {
	var evs []any
	for _, s := range cat.servers {
		if rng.IntN(4) == 0 {
			continue
		}
		var items []json.RawMessage
		for i, it := range s.items {
			switch rng.IntN(4) {
			case 0:
			case 1, 2:
				var def map[string]any
				_ = json.Unmarshal(it, &def)
				def["description"] = fmt.Sprintf("an earlier %s, revision %d", s.tools[i], rng.IntN(1000))
				b, _ := json.Marshal(def)
				items = append(items, b)
			default:
				items = append(items, it)
			}
		}
		sn := snapshot(s.name, fmt.Sprintf("an earlier description of %s, revision %d", s.name, rng.IntN(1000)), items...)
		if rng.IntN(4) == 0 {
			sn.CacheScope, sn.AuthContext = subjects.ScopePrivate, "tenant:acme"
		}
		evs = append(evs, status(s.name, subjects.StatusReady), sn)
	}
	return append(evs, status(sdGone, subjects.StatusReady), snapshot(sdGone, "weather news tickets and files",
		tool("get_weather", "Get the weather forecast"), tool("search_news", "Search the news"), tool("read_file", "Read a file")))
}

// sdGone is the server of an earlier history that is removed at its end.
const sdGone = "gone-later"

func (cat *sdCatalog) policy(tb testing.TB) *policy.Policy {
	if cat.pol == nil {
		return nil
	}
	return mustPolicy(tb, cat.pol)
}

var sdPrincipals = []subjects.Principal{
	{Tenant: "local", User: "local"}, {Tenant: "acme", User: "alice"}, {Tenant: "beta", User: "bob"},
}

// sdQueries returns the queries of a seed: development queries, and names and words of the
// catalog's tools.
func sdQueries(tb testing.TB, rng *rand.Rand, cat *sdCatalog, n int) []string {
	dev := benchQueries(tb)
	var qs []string
	for range n {
		qs = append(qs, dev[rng.IntN(len(dev))])
	}
	for range n {
		s := cat.servers[rng.IntN(len(cat.servers))]
		if len(s.tools) == 0 {
			continue
		}
		tn := s.tools[rng.IntN(len(s.tools))]
		switch rng.IntN(5) {
		case 0:
			qs = append(qs, subjects.PublicName(s.name, tn))
		case 1:
			qs = append(qs, tn)
		case 2:
			qs = append(qs, strings.ReplaceAll(tn, "_", " "))
		case 3:
			var def struct{ Description string }
			_ = json.Unmarshal(s.items[slices.Index(s.tools, tn)], &def)
			words := strings.FieldsFunc(def.Description, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
			if len(words) > 0 {
				i := rng.IntN(len(words))
				qs = append(qs, strings.Join(words[i:min(len(words), i+1+rng.IntN(4))], " "))
			}
		case 4:
			qs = append(qs, sdChinese[rng.IntN(len(sdChinese))])
		}
	}
	return qs
}

func sdJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sdSearch searches c and fails on an API error.
func sdSearch(t *testing.T, c *Catalog, req subjects.SearchRequest) subjects.SearchReply {
	t.Helper()
	req.V = 1
	rep := c.Search(context.Background(), req)
	if rep.Error != nil {
		t.Fatalf("search %+v: %s: %s", req, rep.Error.Code, rep.Error.Message)
	}
	return rep
}

// sdQueriesPerSeed is how many development queries, and as many made of the catalog's names and
// words, each seed searches (SEARCHDIFF_QUERIES).
var sdQueriesPerSeed = 2

// sdKeepServers scales the share of the evaluation catalog's servers a seed keeps (at most
// 0.4 to all of them): a quarter of that by default, for a test fast enough under -race; all
// with SEARCHDIFF_SEEDS set.
var sdKeepServers = 0.25

// sdSeeds returns the first seed and how many (SEARCHDIFF_FIRST, SEARCHDIFF_SEEDS): a longer
// hunt runs, for example, SEARCHDIFF_SEEDS=50 SEARCHDIFF_QUERIES=8.
func sdSeeds() (first uint64, n int) {
	first, n = 20261202, 2
	if s := os.Getenv("SEARCHDIFF_QUERIES"); s != "" {
		sdQueriesPerSeed, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("SEARCHDIFF_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
		sdKeepServers = 1
	}
	if s := os.Getenv("SEARCHDIFF_FIRST"); s != "" {
		first, _ = strconv.ParseUint(s, 10, 64)
	}
	return first, n
}

func TestSearchDifferential(t *testing.T) {
	first, n := sdSeeds()
	for i := range n {
		seed := first + uint64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSearchDifferential(t, seed) })
	}
}

func runSearchDifferential(t *testing.T, seed uint64) {
	cat := genSearchCatalog(t, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	a := openDirect(t, cat.policy(t))
	a.apply(cat.events(nil, nil)...)
	qs := sdQueries(t, rng, cat, sdQueriesPerSeed)
	// b: another order, after an earlier history searched as every principal (statistics kept
	// per visibility class and generation, tombstones of replaced tools).
	b := openDirect(t, cat.policy(t))
	rounds, _ := strconv.Atoi(os.Getenv("SEARCHDIFF_ROUNDS")) // more: compactions of the index
	for range max(rounds, 1) {
		b.apply(cat.earlier(rng)...)
		for _, pr := range sdPrincipals {
			if cat.pol != nil && pr.Tenant == "local" {
				pr = subjects.Principal{User: "local"}
			}
			for _, q := range qs[:min(2, len(qs))] {
				b.Search(context.Background(), subjects.SearchRequest{V: 1, Query: q, Principal: pr})
				b.Search(context.Background(), subjects.SearchRequest{V: 1, Query: q, Principal: pr, Tags: []string{LabelReadOnly}})
			}
		}
	}
	b.apply(cat.events(rng, nil)...)
	b.apply(status(sdGone, subjects.StatusRemoved))
	errs := map[string]int{}
	fail := func(format string, args ...any) {
		t.Helper()
		if errs[format]++; errs[format] <= 3 {
			t.Errorf(format, args...)
		}
	}
	ctx := context.Background()
	for _, pr := range sdPrincipals {
		if cat.pol != nil && pr.Tenant == "local" {
			pr = subjects.Principal{User: "local"}
		}
		// Which tools pr may see, and the catalog of those alone.
		vis, revoked := map[string]bool{}, map[string]bool{}
		for _, s := range cat.servers {
			for _, tn := range s.tools {
				pub := subjects.PublicName(s.name, tn)
				if rep := a.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{pub}, Principal: pr}); rep.Error == nil {
					vis[s.name+"\x00"+tn] = true
					revoked[pub] = rep.Tools[0].State == "revoked"
				}
			}
		}
		only := openDirect(t, cat.policy(t))
		only.apply(cat.events(rng, func(s, tn string) bool { return vis[s+"\x00"+tn] })...)

		for _, q := range qs {
			{
				req := subjects.SearchRequest{Query: q, K: 100, Principal: pr, Detail: subjects.DetailFull, IncludeUnavailable: rng.IntN(2) == 0}
				ra, rb, ro := sdSearch(t, a.Catalog, req), sdSearch(t, b.Catalog, req), sdSearch(t, only.Catalog, req)
				if sdJSON(ra) != sdJSON(rb) {
					fail("order: %v %q unavail=%v:\n a %v\n b %v", pr, q, req.IncludeUnavailable, sdScores(ra.Tools), sdScores(rb.Tools))
				}
				if sdJSON(ra) != sdJSON(ro) {
					fail("hidden tools: %v %q unavail=%v:\n all  %v\n only %v", pr, q, req.IncludeUnavailable, sdScores(ra.Tools), sdScores(ro.Tools))
				}
				// k prefix.
				for _, k := range []int{1 + rng.IntN(10), 11 + rng.IntN(89)} {
					rk := req
					rk.K = k
					got := sdSearch(t, a.Catalog, rk)
					if want := ra.Tools[:min(k, len(ra.Tools))]; sdJSON(got.Tools) != sdJSON(want) {
						fail("k prefix: %v %q k=%d:\n got  %v\n want %v", pr, q, k, sdScores(got.Tools), sdScores(want))
					}
				}
				// Detail levels.
				for _, d := range []string{subjects.DetailName, subjects.DetailSummary} {
					rd := req
					rd.Detail = d
					got := sdSearch(t, a.Catalog, rd)
					if len(got.Tools) != len(ra.Tools) {
						fail("detail %s: %v %q: %d tools, full %d", d, pr, q, len(got.Tools), len(ra.Tools))
						continue
					}
					for i, g := range got.Tools {
						w := ra.Tools[i]
						if g.Name != w.Name || g.Score != w.Score {
							fail("detail %s: %v %q #%d: %s %v, full %s %v", d, pr, q, i, g.Name, g.Score, w.Name, w.Score)
						}
						if d == subjects.DetailSummary && (g.Server != w.Server || g.Tool != w.Tool || g.Title != w.Title ||
							!slices.Equal(g.Labels, w.Labels) || g.State != w.State || g.StateReason != w.StateReason) {
							fail("detail summary: %v %q #%d: %+v, full %+v", pr, q, i, g, w)
						}
					}
				}
				// Details of the first results.
				for _, w := range ra.Tools[:min(len(ra.Tools), 8)] {
					dr := a.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{w.Name}, Principal: pr})
					if dr.Error != nil || len(dr.Tools) != 1 {
						fail("details %s (%v): %+v", w.Name, pr, dr.Error)
						continue
					}
					g := dr.Tools[0]
					g.Score = w.Score
					if sdJSON(g) != sdJSON(w) {
						fail("details %s (%v):\n details %s\n search  %s", w.Name, pr, sdJSON(g), sdJSON(w))
					}
				}
				// Filters: a server filter, and each label.
				if len(ra.Tools) > 0 {
					srv := ra.Tools[rng.IntN(len(ra.Tools))].Server
					rs := req
					rs.Servers = []string{srv}
					got := sdSearch(t, a.Catalog, rs)
					var want []subjects.ToolInfo
					for _, w := range ra.Tools {
						if w.Server == srv {
							want = append(want, w)
						}
					}
					sdCheckFiltered(fail, "server "+srv, pr, q, got.Tools, want, len(ra.Tools))
				}
				for _, tag := range []string{LabelReadOnly, LabelDestructive, LabelNeedsApproval} {
					rs := req
					rs.Tags = []string{tag}
					got := sdSearch(t, a.Catalog, rs)
					var want []subjects.ToolInfo
					for _, w := range ra.Tools {
						if slices.Contains(w.Labels, tag) {
							want = append(want, w)
						}
					}
					sdCheckFiltered(fail, "tag "+tag, pr, q, got.Tools, want, len(ra.Tools))
				}
			}
		}
		// Exact names and select.
		var pubs []string
		for _, s := range cat.servers {
			for _, tn := range s.tools {
				pubs = append(pubs, subjects.PublicName(s.name, tn))
			}
		}
		for range 20 {
			p := pubs[rng.IntN(len(pubs))]
			full := sdSearch(t, a.Catalog, subjects.SearchRequest{Query: "select:" + p, Principal: pr, IncludeUnavailable: true})
			rep := sdSearch(t, a.Catalog, subjects.SearchRequest{Query: p, Principal: pr})
			if len(full.Tools) == 1 && full.Tools[0].State == "fresh" && (len(rep.Tools) == 0 || rep.Tools[0].Name != p) {
				fail("exact name %s (%v): got %v", p, pr, names(rep.Tools))
			}
			if len(full.Tools) == 0 && slices.Contains(names(rep.Tools), p) {
				fail("exact name %s (%v): not selectable but found", p, pr)
			}
			var sel []string
			for range 1 + rng.IntN(5) {
				sel = append(sel, pubs[rng.IntN(len(pubs))])
			}
			sel = append(sel, "nosuch__tool")
			req := subjects.SearchRequest{Query: "select:" + strings.Join(sel, ","), Principal: pr, K: 100, Detail: subjects.DetailFull, IncludeUnavailable: true}
			ga, go_ := sdSearch(t, a.Catalog, req), sdSearch(t, only.Catalog, req)
			if sdJSON(ga) != sdJSON(go_) {
				fail("select %v (%v):\n all  %v\n only %v", sel, pr, names(ga.Tools), names(go_.Tools))
			}
			var want []string
			for _, n := range sel {
				if s, tn, ok := a.Lookup(n); ok && vis[s+"\x00"+tn] && !revoked[n] && !slices.Contains(want, n) {
					want = append(want, n)
				}
			}
			if got := names(ga.Tools); !slices.Equal(got, want) {
				fail("select %v (%v): got %v, want %v", sel, pr, got, want)
			}
			dr := subjects.DetailsRequest{V: 1, Names: sel, Principal: pr}
			if da, do := a.Details(ctx, dr), only.Details(ctx, dr); sdJSON(da) != sdJSON(do) {
				fail("details %v (%v):\n all  %s\n only %s", sel, pr, sdJSON(da.Error), sdJSON(do.Error))
			}
		}
	}
}

// sdFileOp matches queries that may name a file with a verb: file intent keeps the operation's
// words in the query when the request's filters let no tool named for it through (search doc),
// so a filter may change those searches' scores.
var sdFileOp = regexp.MustCompile(`/|\.[A-Za-z0-9]{1,5}\b`)

// sdCheckFiltered checks a filtered search (got) against the unfiltered one (of unfiltered
// results) restricted to the filter (want). Coverage and proximity rerank the best 50
// candidates (search doc): a filter that lets fewer through reranks some that the unfiltered
// search left after its head, so the two agree when the unfiltered search has no more
// candidates than that.
func sdCheckFiltered(fail func(string, ...any), what string, pr subjects.Principal, q string, got, want []subjects.ToolInfo, unfiltered int) {
	if sdFileOp.MatchString(q) || unfiltered > 50 {
		return
	}
	if sdJSON(sdScores(got)) != sdJSON(sdScores(want)) || len(want) > 0 && sdJSON(got) != sdJSON(want) {
		fail("filter %s: %v %q:\n got  %v\n want %v", what, pr, q, sdScores(got), sdScores(want))
	}
}

func sdScores(ts []subjects.ToolInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s:%.4f", t.Name, t.Score))
	}
	return out
}

// TestTagFilterKeepsScores: a tag filter (read-only here) picks among the tools the principal
// may see; it does not change how they score. The server evidence of a tool (how much of the
// query its server's tools match between them) counts the server's tools the principal may see,
// whether or not the request's filter lets them through, as the server filter does (every tool
// of a server passes it or none): before, a read-only search scored get_forecast without its
// server's save_alert matching "alert", lower than the unfiltered search did, and the order of
// the filtered results could differ from the unfiltered ones.
func TestTagFilterKeepsScores(t *testing.T) {
	d := openDirect(t, nil)
	d.apply(fillerServers([]string{"a", "b", "c", "d", "e", "f"}, "another thing")...)
	d.apply(status("weather", subjects.StatusReady), snapshot("weather", "Weather service",
		tool("get_forecast", "Get the weather forecast for a city", "annotations", `{"readOnlyHint":true}`),
		tool("save_alert", "Save an alert about severe storms")))
	d.apply(status("storms", subjects.StatusReady), snapshot("storms", "Storm service",
		tool("track_storm", "Track storms and their forecast", "annotations", `{"readOnlyHint":true}`)))
	for _, pr := range []subjects.Principal{{}, {Tenant: "acme", User: "alice"}} {
		all := sdSearch(t, d.Catalog, subjects.SearchRequest{Query: "forecast of storms, and an alert", Principal: pr})
		ro := sdSearch(t, d.Catalog, subjects.SearchRequest{Query: "forecast of storms, and an alert", Principal: pr, Tags: []string{LabelReadOnly}})
		var want []subjects.ToolInfo
		for _, ti := range all.Tools {
			if slices.Contains(ti.Labels, LabelReadOnly) {
				want = append(want, ti)
			}
		}
		if len(want) != 2 || sdJSON(ro.Tools) != sdJSON(want) {
			t.Errorf("%v: read-only %v, want the unfiltered read-only %v", pr, sdScores(ro.Tools), sdScores(want))
		}
	}
}

// TestSearchDifferentialService: a generated catalog published to the registry stream answers
// alike from a catalog that applied its events directly, a replica that followed the stream
// live (asked over NATS, through the catalog service and the Go client) and a replica rebuilt
// by replay (asked in process): searches of every detail level and filter, selections, and
// details of every public name.
func TestSearchDifferentialService(t *testing.T) {
	first, _ := sdSeeds()
	cat := genSearchCatalog(t, first)
	rng := rand.New(rand.NewPCG(first, 11))
	evs := cat.events(rng, nil)
	direct := openDirect(t, cat.policy(t))
	direct.apply(evs...)

	env := natstest.Start(t)
	live := startReplica(t, env, "", cat.policy(t), env.Connect(t))
	seq := publish(t, env.JS, evs...)
	waitSeq(t, live.Catalog, seq)
	replayed := startReplica(t, env, t.TempDir(), cat.policy(t), nil)
	waitSeq(t, replayed.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	ctx := context.Background()
	tenant := func(pr subjects.Principal) string { return cmp.Or(pr.Tenant, "local") }
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(ctx, "local", subjects.ServersRequest{V: 1})
		return err == nil
	})

	var pubs []string
	for _, s := range cat.servers {
		for _, tn := range s.tools {
			pubs = append(pubs, subjects.PublicName(s.name, tn))
		}
	}
	qs := sdQueries(t, rng, cat, 2)
	for range 2 {
		qs = append(qs, "select:"+pubs[rng.IntN(len(pubs))]+","+pubs[rng.IntN(len(pubs))])
	}
	for _, pr := range sdPrincipals {
		if cat.pol != nil && pr.Tenant == "local" {
			pr = subjects.Principal{User: "local"}
		}
		for _, q := range qs {
			for _, d := range []string{subjects.DetailName, subjects.DetailSummary, subjects.DetailFull} {
				req := subjects.SearchRequest{V: 1, Query: q, K: 1 + rng.IntN(100), Detail: d, Principal: pr,
					IncludeUnavailable: rng.IntN(2) == 0}
				if rng.IntN(3) == 0 {
					req.Tags = []string{LabelReadOnly}
				}
				want := sdJSON(direct.Search(ctx, req))
				if got := sdJSON(replayed.Search(ctx, req)); got != want {
					t.Errorf("replayed, %+v:\n got  %s\n want %s", req, got, want)
				}
				rep, err := cl.Search(ctx, tenant(pr), req)
				if err != nil {
					t.Fatalf("search over NATS: %v", err)
				}
				if got := sdJSON(rep); got != want {
					t.Errorf("over NATS, %+v:\n got  %s\n want %s", req, got, want)
				}
			}
		}
		for i := 0; i < len(pubs); i += 50 {
			req := subjects.DetailsRequest{V: 1, Names: pubs[i:min(len(pubs), i+50)], Principal: pr}
			want := sdJSON(direct.Details(ctx, req))
			if got := sdJSON(replayed.Details(ctx, req)); got != want {
				t.Errorf("replayed details %v:\n got  %s\n want %s", pr, got, want)
			}
			rep, err := cl.Details(ctx, tenant(pr), req)
			if err != nil {
				t.Fatalf("details over NATS: %v", err)
			}
			if got := sdJSON(rep); got != want {
				t.Errorf("details over NATS %v:\n got  %s\n want %s", pr, got, want)
			}
		}
	}
}
