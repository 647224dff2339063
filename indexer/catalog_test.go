package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// demoTools lists the tools of a real demo server (package demoservers) as raw JSON, through
// the server's own tools/list handler.
func demoTools(t testing.TB, name string) []json.RawMessage {
	t.Helper()
	srv, err := demoservers.New(name, demoservers.Options{Logs: 10})
	if err != nil {
		t.Fatalf("demo server %s: %v", name, err)
	}
	out := srv.HandleMessage(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("tools/list of %s: %v", name, err)
	}
	var res struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.Result.Tools) == 0 {
		t.Fatalf("tools/list of %s: %v: %s", name, err, b)
	}
	return res.Result.Tools
}

// demoDescriptions are the descriptions `mcpstream up` configures for the demo servers.
var demoDescriptions = map[string]string{
	"logging":   "Application logs: query recent log entries by level and time",
	"ticketing": "Issue tracker: create and list tickets",
	"kb":        "Company knowledge base: policies, handbooks and FAQs",
}

// demoEvents is the catalog of the three real demo servers plus a Chinese one.
func demoEvents(t testing.TB) []any {
	t.Helper()
	var evs []any
	for _, name := range []string{"kb", "logging", "ticketing"} {
		evs = append(evs, status(name, subjects.StatusReady), snapshot(name, demoDescriptions[name], demoTools(t, name)...))
	}
	return append(evs, status("bing-cn", subjects.StatusReady), snapshot("bing-cn", "中文必应搜索工具",
		tool("bing_search", "使用必应搜索指定的关键词，并返回搜索结果列表")))
}

func TestSearchDetailsServers(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, filepath.Join(t.TempDir(), "r0"), nil, nil)
	waitSeq(t, r.Catalog, seq)

	tests := []struct {
		name, query string
		mod         func(*subjects.SearchRequest)
		wantFirst   string
		wantNone    bool
	}{
		{name: "natural language", query: "open a ticket for a bug", wantFirst: "ticketing__*"},
		{name: "natural language 2", query: "file a new ticket in the tracker", wantFirst: "ticketing__createIssue"},
		{name: "exact public name", query: "kb__get_document", wantFirst: "kb__get_document"},
		{name: "exact original name", query: "getLogStats please", wantFirst: "logging__getLogStats"},
		{name: "camelCase split", query: "list issues", wantFirst: "ticketing__listIssues"},
		{name: "chinese", query: "必应搜索关键词", wantFirst: "bing-cn__bing_search"},
		{name: "parameter words", query: "priority low medium critical", wantFirst: "ticketing__createIssue"},
		{name: "nothing matches", query: "zebra quantum xylophone", wantNone: true},
		{name: "server filter", query: "error entries", mod: func(r *subjects.SearchRequest) { r.Servers = []string{"logging"} }, wantFirst: "logging__getLogs"},
		{name: "tag filter", query: "tickets issue tracker", mod: func(r *subjects.SearchRequest) { r.Tags = []string{LabelReadOnly} }, wantFirst: "ticketing__listIssues"},
		{name: "select", query: "select:kb__get_document, ticketing__closeIssue,nope__x", wantFirst: "kb__get_document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mods []func(*subjects.SearchRequest)
			if tt.mod != nil {
				mods = append(mods, tt.mod)
			}
			rep := find(t, r.Catalog, tt.query, mods...)
			mustNoErr(t, rep.Error)
			got := names(rep.Tools)
			if tt.wantNone {
				if len(got) != 0 {
					t.Fatalf("got %v, want nothing", got)
				}
				return
			}
			if len(got) == 0 || !policy.Match(tt.wantFirst, got[0]) {
				t.Fatalf("got %v, want %s first", got, tt.wantFirst)
			}
			for _, ti := range rep.Tools {
				if !subjects.ValidPublicName(ti.Name) || !strings.Contains(ti.Name, "__") {
					t.Errorf("invalid public name %q", ti.Name)
				}
				if slices.Contains(subjects.Reserved, ti.Name) {
					t.Errorf("reserved name %q returned", ti.Name)
				}
			}
		})
	}

	t.Run("select keeps order and skips unknown", func(t *testing.T) {
		rep := find(t, r.Catalog, "select:kb__get_document,ticketing__closeIssue,nope__x")
		if got, want := names(rep.Tools), []string{"kb__get_document", "ticketing__closeIssue"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("server filter excludes the rest", func(t *testing.T) {
		rep := find(t, r.Catalog, "search error entries", func(r *subjects.SearchRequest) { r.Servers = []string{"logging"} })
		for _, ti := range rep.Tools {
			if ti.Server != "logging" {
				t.Errorf("%s from server %s", ti.Name, ti.Server)
			}
		}
	})
	t.Run("labels", func(t *testing.T) {
		rep := find(t, r.Catalog, "select:ticketing__closeIssue,ticketing__listIssues")
		if got, want := rep.Tools[0].Labels, []string{LabelDestructive, LabelIdempotent, LabelNeedsApproval}; !slices.Equal(got, want) {
			t.Errorf("closeIssue labels %v, want %v", got, want)
		}
		if got, want := rep.Tools[1].Labels, []string{LabelReadOnly, LabelIdempotent}; !slices.Equal(got, want) {
			t.Errorf("listIssues labels %v, want %v", got, want)
		}
	})
	t.Run("detail levels", func(t *testing.T) {
		q := "select:ticketing__closeIssue"
		name := find(t, r.Catalog, q, func(r *subjects.SearchRequest) { r.Detail = subjects.DetailName }).Tools[0]
		if name.Server != "" || name.Description != "" || name.InputSchema != nil {
			t.Errorf("name detail carries more than the name: %+v", name)
		}
		sum := find(t, r.Catalog, q).Tools[0]
		if sum.Server != "ticketing" || sum.Tool != "closeIssue" || sum.Description == "" || sum.InputSchema != nil || sum.State != subjects.StateFresh {
			t.Errorf("summary: %+v", sum)
		}
		full := find(t, r.Catalog, q, func(r *subjects.SearchRequest) { r.Detail = subjects.DetailFull }).Tools[0]
		if full.InputSchema == nil || full.OutputSchema == nil || full.Annotations == nil || full.Definition == nil || full.ListedAt == "" {
			t.Errorf("full: %+v", full)
		}
	})
	t.Run("details are byte-faithful", func(t *testing.T) {
		schema := `{"type":"object","properties":{"q":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"$defs":{"x":{"oneOf":[{"const":1}]}}}`
		raw := json.RawMessage(`{"name":"weird_schema","description":"d","inputSchema":` + schema + `}`)
		seq := publish(t, env.JS, snapshot("schemas", "", raw))
		waitSeq(t, r.Catalog, seq)
		rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"schemas__weird_schema"}})
		mustNoErr(t, rep.Error)
		if got := string(rep.Tools[0].InputSchema); got != schema {
			t.Errorf("inputSchema\n got %s\nwant %s", got, schema)
		}
		if got := string(rep.Tools[0].Definition); got != string(raw) {
			t.Errorf("definition\n got %s\nwant %s", got, raw)
		}
	})
	t.Run("servers", func(t *testing.T) {
		rep := r.Servers(context.Background(), subjects.ServersRequest{V: 1})
		mustNoErr(t, rep.Error)
		got := map[string]subjects.ServerSummary{}
		for _, s := range rep.Servers {
			got[s.Name] = s
		}
		if s := got["ticketing"]; s.Tools != 3 || s.Status != subjects.StatusReady || s.Description == "" || s.Transport != "stdio" {
			t.Errorf("ticketing: %+v", s)
		}
	})
	t.Run("lookup", func(t *testing.T) {
		srv, tl, ok := r.Lookup("ticketing__closeIssue")
		if !ok || srv != "ticketing" || tl != "closeIssue" {
			t.Errorf("Lookup = %q %q %v", srv, tl, ok)
		}
	})
}

func TestNamespacing(t *testing.T) {
	env := natstest.Start(t)
	// Names that are not plain: dots, spaces, unicode, a leading underscore, a long name, a
	// name that looks like a meta-tool, and the 40-bit hash collision below.
	long := strings.Repeat("very_long_tool_name_", 5)
	cases := []struct{ server, tool string }{
		{"github.com", "create.issue"},
		{"my server", "do it"},
		{"数据", "查询"},
		{"s", "_private"},
		{"s", long},
		{"search", "tools"},
		{"a__b", "c"},
		{"a", "_b__c"},
		{"ok", "search_tools"},
	}
	byServer := map[string][]json.RawMessage{}
	var order []string
	for _, c := range cases {
		if byServer[c.server] == nil {
			order = append(order, c.server)
		}
		byServer[c.server] = append(byServer[c.server], tool(c.tool, "tool "+c.tool))
	}
	var evs []any
	for _, s := range order {
		evs = append(evs, status(s, subjects.StatusReady), snapshot(s, "", byServer[s]...))
	}
	seq := publish(t, env.JS, evs...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)

	seen := map[string]string{}
	for _, c := range cases {
		pub := subjects.PublicName(c.server, c.tool)
		if !subjects.ValidPublicName(pub) || !strings.Contains(pub, "__") || slices.Contains(subjects.Reserved, pub) {
			t.Errorf("(%q, %q) → %q: not a valid namespaced name", c.server, c.tool, pub)
		}
		if prev, dup := seen[pub]; dup {
			t.Errorf("%q given to two pairs: %s and %s/%s", pub, prev, c.server, c.tool)
		}
		seen[pub] = c.server + "/" + c.tool
		srv, tl, ok := r.Lookup(pub)
		if !ok || srv != c.server || tl != c.tool {
			t.Errorf("Lookup(%q) = %q, %q, %v; want %q, %q", pub, srv, tl, ok, c.server, c.tool)
		}
		rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{pub}})
		if rep.Error != nil || len(rep.Tools) != 1 || rep.Tools[0].Server != c.server || rep.Tools[0].Tool != c.tool {
			t.Errorf("details %q: %+v %+v", pub, rep.Tools, rep.Error)
		}
	}
}

// collidingTools are two tool names of server "srv.a" whose encoded public names collide (the
// first 40 bits of their SHA-256 agree; found by a birthday search over 1.2 M names).
var collidingTools = [2]string{"x)>*`#y", "x&{}(%y"}

func TestPublicNameCollisionRefused(t *testing.T) {
	a, b := subjects.PublicName("srv.a", collidingTools[0]), subjects.PublicName("srv.a", collidingTools[1])
	if a != b {
		t.Fatalf("fixture no longer collides: %q vs %q", a, b)
	}
	env := natstest.Start(t)
	seq := publish(t, env.JS,
		snapshot("srv.a", "", tool(collidingTools[0], "first holder")),
		snapshot("srv.a", "", tool(collidingTools[0], "first holder"), tool(collidingTools[1], "second pair")),
	)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	srv, tl, ok := r.Lookup(a)
	if !ok || srv != "srv.a" || tl != collidingTools[0] {
		t.Fatalf("Lookup(%q) = %q %q %v; want the first holder", a, srv, tl, ok)
	}
	if got := r.Stats().Collisions; got != 1 {
		t.Errorf("collisions = %d, want 1", got)
	}
	rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{a}})
	if len(rep.Tools) != 1 || rep.Tools[0].Description != "first holder" {
		t.Errorf("details: %+v", rep.Tools)
	}
}

func TestRemoval(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)

	// A snapshot without closeIssue removes it.
	var kept []json.RawMessage
	for _, raw := range demoTools(t, "ticketing") {
		if parseDef(raw).Name != "closeIssue" {
			kept = append(kept, raw)
		}
	}
	seq = publish(t, env.JS, snapshot("ticketing", demoDescriptions["ticketing"], kept...))
	waitSeq(t, r.Catalog, seq)
	if got := names(find(t, r.Catalog, "close a ticket", func(r *subjects.SearchRequest) { r.IncludeUnavailable = true }).Tools); slices.Contains(got, "ticketing__closeIssue") {
		t.Errorf("removed tool still found: %v", got)
	}
	rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"ticketing__closeIssue"}})
	if rep.Error == nil || rep.Error.Code != subjects.CodeNotFound || rep.Error.Reason != subjects.StateRemoved {
		t.Errorf("details of a removed tool: %+v", rep.Error)
	}
	if _, _, ok := r.Lookup("ticketing__closeIssue"); ok {
		t.Error("removed tool still maps back")
	}

	// The server removed: it and its tools disappear.
	seq = publish(t, env.JS, status("ticketing", subjects.StatusRemoved))
	waitSeq(t, r.Catalog, seq)
	if got := names(find(t, r.Catalog, "ticket").Tools); len(got) != 0 {
		t.Errorf("tools of a removed server found: %v", got)
	}
	for _, s := range r.Servers(context.Background(), subjects.ServersRequest{}).Servers {
		if s.Name == "ticketing" {
			t.Errorf("removed server listed: %+v", s)
		}
	}
	rep = r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"ticketing__createIssue"}})
	if rep.Error == nil || rep.Error.Reason != subjects.StateRemoved {
		t.Errorf("details after server removal: %+v", rep.Error)
	}

	// It comes back when it is added again.
	seq = publish(t, env.JS, status("ticketing", subjects.StatusReady), snapshot("ticketing", "", tool("createIssue", "File a new ticket.")))
	waitSeq(t, r.Catalog, seq)
	if got := names(find(t, r.Catalog, "file a new ticket").Tools); !slices.Contains(got, "ticketing__createIssue") {
		t.Errorf("re-added tool not found: %v", got)
	}
}

func TestFreshness(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	const q = "search the knowledge base for the refund policy"
	const name = "kb__search_knowledge_base"
	withUnavail := func(r *subjects.SearchRequest) { r.IncludeUnavailable = true }
	state := func(t *testing.T) string {
		t.Helper()
		rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{name}})
		if len(rep.Tools) != 1 {
			t.Fatalf("details: %+v", rep)
		}
		return rep.Tools[0].State
	}
	steps := []struct {
		name      string
		ev        any
		state     string
		inDefault bool
		inAll     bool
	}{
		{"fresh", nil, subjects.StateFresh, true, true},
		{"list_changed makes it stale", changed("kb"), subjects.StateStale, false, true},
		{"a new snapshot makes it fresh", snapshot("kb", demoDescriptions["kb"], demoTools(t, "kb")...), subjects.StateFresh, true, true},
		{"disconnected", status("kb", subjects.StatusUnavailable), subjects.StateUnavailable, false, true},
		{"reconnected", status("kb", subjects.StatusReady), subjects.StateFresh, true, true},
		{"revoked", revoke("kb", []string{"search_knowledge_base"}, nil), subjects.StateRevoked, false, false},
		{"restored", revoke("kb", nil, []string{"search_knowledge_base"}), subjects.StateFresh, true, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.ev != nil {
				waitSeq(t, r.Catalog, publish(t, env.JS, st.ev))
			}
			if got := state(t); got != st.state {
				t.Errorf("state %q, want %q", got, st.state)
			}
			if got := slices.Contains(names(find(t, r.Catalog, q).Tools), name); got != st.inDefault {
				t.Errorf("in default search = %v, want %v", got, st.inDefault)
			}
			all := find(t, r.Catalog, q, withUnavail)
			if got := slices.Contains(names(all.Tools), name); got != st.inAll {
				t.Errorf("in search with includeUnavailable = %v, want %v", got, st.inAll)
			}
			for _, ti := range all.Tools {
				if ti.Name == name && st.state != subjects.StateFresh && !slices.Contains(ti.Labels, st.state) {
					t.Errorf("labels %v lack the state %q", ti.Labels, st.state)
				}
			}
		})
	}
}

func TestMalformedEventsAreSkipped(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS,
		rawEvent{subjects.RegistrySnapshot("x", subjects.KindTools), []byte("not json")},
		rawEvent{subjects.RegistryStatus("x"), []byte(`{"v":2,"type":"status","server":"x"}`)},
		rawEvent{subjects.RegistryStatus("x"), []byte(`{"v":1,"type":"bogus","server":"x"}`)},
		// The payload names another server than its subject.
		rawEvent{subjects.RegistrySnapshot("x", subjects.KindTools), mustJSON(snapshot("kb", "", tool("evil", "shadow kb")))},
		// A snapshot payload on a status subject.
		rawEvent{subjects.RegistryStatus("kb"), mustJSON(snapshot("kb", "", tool("evil", "shadow kb")))},
		// A valid snapshot with junk items: only the good one is kept.
		snapshot("kb", "", json.RawMessage(`42`), json.RawMessage(`{"name":""}`), json.RawMessage(`{"description":"no name"}`),
			tool("good", "a good tool"), tool("good", "the same name again"),
			json.RawMessage(`{"name":"odd","description":17,"inputSchema":"nope","annotations":[1]}`)),
	)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	st := r.Stats()
	if st.BadEvents != 5 {
		t.Errorf("bad events = %d, want 5", st.BadEvents)
	}
	if st.Tools != 2 {
		t.Errorf("tools = %d, want 2 (good, odd)", st.Tools)
	}
	if _, _, ok := r.Lookup("kb__evil"); ok {
		t.Error("a payload under another server's subject was applied")
	}
	rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"kb__good", "kb__odd"}})
	mustNoErr(t, rep.Error)
	if rep.Tools[0].Description != "a good tool" {
		t.Errorf("first definition of a duplicated name should win: %q", rep.Tools[0].Description)
	}
	// The replica is still following.
	waitSeq(t, r.Catalog, publish(t, env.JS, snapshot("kb", "", tool("later", "still following"))))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestFastPathSameAnswers: skipping the per-candidate check when every tool is visible gives
// the same answers as checking each one.
func TestFastPathSameAnswers(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	queries := []string{"open a ticket for a bug", "logs", "knowledge base refund", "必应搜索", "getLogStats", "close ticket"}
	answers := func() string {
		var b strings.Builder
		for _, q := range queries {
			for _, k := range []int{1, 3, 10} {
				rep := find(t, r.Catalog, q, func(r *subjects.SearchRequest) { r.K = k })
				out, _ := json.Marshal(rep)
				b.Write(out)
			}
		}
		return b.String()
	}
	r.mu.RLock()
	fast := r.everyToolVisible(&filter{pr: policy.Local, usableOnly: true})
	r.mu.RUnlock()
	if !fast {
		t.Fatal("the demo catalog should take the fast path")
	}
	withFast := answers()
	r.noFastPath = true
	if got := answers(); got != withFast {
		t.Errorf("answers differ:\n%s", firstDiff(got, withFast))
	}
	// A server that goes unavailable turns the fast path off.
	waitSeq(t, r.Catalog, publish(t, env.JS, status("kb", subjects.StatusUnavailable)))
	r.mu.RLock()
	fast = r.everyToolVisible(&filter{pr: policy.Local, usableOnly: true})
	r.mu.RUnlock()
	if fast {
		t.Error("fast path taken with an unavailable server")
	}
}

// TestRemovedRecordsBounded: removed tools are remembered up to MaxRemoved; past it the ones
// removed longest ago are forgotten (details: not_found without the "removed" reason), the
// same ones in a replica that followed along, one that rebuilt by replay, and one restarted.
func TestRemovedRecordsBounded(t *testing.T) {
	env := natstest.Start(t)
	const n, limit = 10, 4
	var all []json.RawMessage
	for i := range n {
		all = append(all, tool(fmt.Sprintf("t%d", i), fmt.Sprintf("tool number %d", i)))
	}
	follower := startReplicaConfig(t, env, Config{MaxRemoved: limit}, nil)
	seq := publish(t, env.JS, status("churn", subjects.StatusReady), snapshot("churn", "churning server", all...))
	for i := 1; i <= n; i++ { // each snapshot drops one more tool: t0 first, t9 last
		seq = publish(t, env.JS, snapshot("churn", "churning server", all[i:]...))
	}
	waitSeq(t, follower.Catalog, seq)
	dir := filepath.Join(t.TempDir(), "disk")
	replayed := startReplicaConfig(t, env, Config{Dir: dir, MaxRemoved: limit}, nil)
	waitSeq(t, replayed.Catalog, seq)

	removedSet := func(c *Catalog) []string {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return sortedKeys(c.removed)
	}
	want := []string{"churn__t6", "churn__t7", "churn__t8", "churn__t9"}
	if got := removedSet(follower.Catalog); !slices.Equal(got, want) {
		t.Errorf("follower remembers %v, want %v", got, want)
	}
	if got := removedSet(replayed.Catalog); !slices.Equal(got, want) {
		t.Errorf("replayed replica remembers %v, want %v", got, want)
	}
	replayed.stop(t)
	restarted := startReplicaConfig(t, env, Config{Dir: dir, MaxRemoved: limit}, nil)
	waitSeq(t, restarted.Catalog, seq)
	if got := removedSet(restarted.Catalog); !slices.Equal(got, want) {
		t.Errorf("restarted replica remembers %v, want %v", got, want)
	}

	ctx := context.Background()
	recent := follower.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"churn__t9"}})
	if recent.Error == nil || recent.Error.Code != subjects.CodeNotFound || recent.Error.Reason != subjects.StateRemoved {
		t.Errorf("details of the last removed tool: %+v, want not_found (removed)", recent.Error)
	}
	old := follower.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"churn__t0"}})
	if old.Error == nil || old.Error.Code != subjects.CodeNotFound || old.Error.Reason == subjects.StateRemoved {
		t.Errorf("details of a forgotten tool: %+v, want not_found without reason removed", old.Error)
	}
	// A forgotten tool that comes back is an ordinary tool again.
	seq = publish(t, env.JS, snapshot("churn", "churning server", all[0]))
	waitSeq(t, follower.Catalog, seq)
	if rep := follower.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"churn__t0"}}); rep.Error != nil || len(rep.Tools) != 1 {
		t.Errorf("t0 back: %+v", rep.Error)
	}
	if got := removedSet(follower.Catalog); len(got) > limit {
		t.Errorf("remembers %d removed tools, limit %d", len(got), limit)
	}
}

// TestListChangedOfUnknownServer: a list_changed of a server the registry never announced makes
// no phantom server (it was listed by servers, status unknown, under the open policy).
func TestListChangedOfUnknownServer(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, append(demoEvents(t), changed("ghost"))...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	for _, s := range r.Servers(context.Background(), subjects.ServersRequest{V: 1}).Servers {
		if s.Name == "ghost" {
			t.Errorf("phantom server listed: %+v", s)
		}
	}
	// A known server's list_changed still makes its tools stale.
	seq = publish(t, env.JS, changed("kb"))
	waitSeq(t, r.Catalog, seq)
	det := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"kb__get_document"}})
	if len(det.Tools) != 1 || det.Tools[0].State != subjects.StateStale {
		t.Errorf("kb__get_document after list_changed: %+v %+v", det.Tools, det.Error)
	}
}
