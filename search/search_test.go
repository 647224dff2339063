package search

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

// smallCatalog is a hand-made catalog with overlapping vocabulary.
func smallCatalog() []Doc {
	return []Doc{
		{ID: "github__create_issue", Server: "github", ServerDescription: "GitHub API: repositories, issues, pull requests.",
			Name: "create_issue", Description: "Create a new issue in a GitHub repository.",
			Params: []Param{{"owner", "Repository owner"}, {"repo", "Repository name"}, {"title", "Issue title"}}},
		{ID: "github__list_issues", Server: "github", ServerDescription: "GitHub API: repositories, issues, pull requests.",
			Name: "list_issues", Description: "List issues in a GitHub repository, with filters.",
			Params: []Param{{"owner", ""}, {"repo", ""}, {"state", "open or closed"}}},
		{ID: "gitlab__create_issue", Server: "gitlab", ServerDescription: "GitLab projects and issues.",
			Name: "create_issue", Description: "Create a new issue in a GitLab project.",
			Params: []Param{{"project", "Project path"}, {"title", "Issue title"}}},
		{ID: "jira__create_ticket", Server: "jira", ServerDescription: "Atlassian Jira issue tracking.",
			Name: "create_ticket", Description: "Open a ticket in a Jira project.",
			Tags: []string{"destructive"}},
		{ID: "weather__get_forecast", Server: "weather", ServerDescription: "Weather data.",
			Name: "get_forecast", Description: "Get the weather forecast for a city."},
		{ID: "fs__write_file", Server: "fs", ServerDescription: "Local filesystem.",
			Name: "write_file", Description: "Write content to a file, creating it if needed.",
			Params: []Param{{"path", "File path"}, {"content", "Text to write"}}},
		{ID: "fs__read_file", Server: "fs", ServerDescription: "Local filesystem.",
			Name: "read_file", Description: "Read the contents of a file.", Params: []Param{{"path", "File path"}},
			Tags: []string{"read-only"}},
		{ID: "bing__search", Server: "bing", ServerDescription: "必应搜索",
			Name: "bing_search", Description: "使用必应搜索指定的关键词，并返回搜索结果列表"},
		{ID: "logs__getLogs", Server: "logs", ServerDescription: "Container logs.",
			Name: "getLogs", Description: "Fetch recent log lines of a container."},
	}
}

func newSmall(t testing.TB) *Index {
	t.Helper()
	ix := New(Config{})
	for _, d := range smallCatalog() {
		ix.Upsert(d)
	}
	return ix
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestSearchRanking(t *testing.T) {
	ix := newSmall(t)
	tests := []struct {
		query string
		first string
	}{
		{"create an issue on github", "github__create_issue"},
		{"open a new gitlab issue", "gitlab__create_issue"},
		{"gitlab__create_issue", "gitlab__create_issue"}, // exact public name
		{"GitHub__Create_Issue", "github__create_issue"}, // case-insensitive
		{"what is the weather forecast in Paris", "weather__get_forecast"},
		{"save the report to /tmp/report.md", "fs__write_file"},
		{"read /etc/hosts", "fs__read_file"},
		{"get logs of my container", "logs__getLogs"},
		{"getLogs", "logs__getLogs"},
		{"必应搜索关键词", "bing__search"},
		{"搜索", "bing__search"},
		{"file a jira ticket", "jira__create_ticket"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			hits := ix.Search(Query{Text: tt.query})
			if len(hits) == 0 || hits[0].ID != tt.first {
				t.Errorf("Search(%q) = %v, want %s first", tt.query, ids(hits), tt.first)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Errorf("scores not descending: %v", hits)
				}
			}
		})
	}
}

func TestSearchExactNameFirst(t *testing.T) {
	ix := newSmall(t)
	// An original name mentioned exactly lifts every tool of that name.
	hits := ix.Search(Query{Text: "use create_issue please"})
	if len(hits) < 2 || !slices.Equal(slices.Sorted(slices.Values(ids(hits[:2]))), []string{"github__create_issue", "gitlab__create_issue"}) {
		t.Errorf("create_issue: got %v, want both create_issue tools first", ids(hits))
	}
	// The query text favours GitHub, but it names the GitLab tool.
	hits = ix.Search(Query{Text: "github repository issue owner repo gitlab__create_issue"})
	if len(hits) == 0 || hits[0].ID != "gitlab__create_issue" {
		t.Fatalf("got %v, want gitlab__create_issue first", ids(hits))
	}
}

func TestSearchFloor(t *testing.T) {
	ix := newSmall(t)
	for _, q := range []string{
		"", "   ", "xyzzy plugh frobnicate", "the of and to a", "!!!???", "zz",
		"please", // a stop word only
	} {
		if hits := ix.Search(Query{Text: q}); len(hits) != 0 {
			t.Errorf("Search(%q) = %v, want nothing", q, ids(hits))
		}
	}
	// A word in every tool says nothing: it falls under the floor.
	ix2 := New(Config{})
	for i := range 20 {
		ix2.Upsert(Doc{ID: fmt.Sprintf("s__t%d", i), Server: "s", Name: fmt.Sprintf("t%d", i),
			Description: fmt.Sprintf("common word %s", []string{"alpha", "beta", "gamma", "delta"}[i%4])})
	}
	if hits := ix2.Search(Query{Text: "common"}); len(hits) != 0 {
		t.Errorf("a word found in every tool returned %v", ids(hits))
	}
	if hits := ix2.Search(Query{Text: "common gamma"}); len(hits) != 5 {
		t.Errorf("common gamma: got %v, want the 5 gamma tools", ids(hits))
	}
}

func TestSearchTinyCatalog(t *testing.T) {
	ix := New(Config{})
	ix.Upsert(Doc{ID: "only__tool", Server: "only", Name: "tool", Description: "Translate text between languages."})
	if hits := ix.Search(Query{Text: "translate this"}); len(hits) != 1 {
		t.Errorf("one-tool catalog: got %v, want the tool", ids(hits))
	}
}

func TestSearchAllowFilter(t *testing.T) {
	ix := newSmall(t)
	const q = "create issue in a repository, a project or a ticket; read or write a file"
	all := ix.Search(Query{Text: q})
	if len(all) < 5 {
		t.Fatalf("unfiltered: %v, want at least 5 hits", ids(all))
	}
	denied := all[0].ID
	calls := map[string]int{}
	var mu sync.Mutex
	allow := func(id string) bool {
		mu.Lock()
		calls[id]++
		mu.Unlock()
		return id != denied
	}
	got := ix.Search(Query{Text: q, K: 3, Allow: allow})
	if want := ids(all)[1:4]; !slices.Equal(ids(got), want) {
		t.Errorf("filtered K=3: got %v, want %v (a rejected tool must not appear nor take a place)", ids(got), want)
	}
	for id, n := range calls {
		if n > 1 {
			t.Errorf("Allow called %d times for %s", n, id)
		}
	}
	// An exact name mention does not bypass the filter.
	if hits := ix.Search(Query{Text: denied, Allow: allow}); slices.Contains(ids(hits), denied) {
		t.Errorf("exact mention of rejected %s returned it: %v", denied, ids(hits))
	}
	// Rejecting everything returns nothing.
	if hits := ix.Search(Query{Text: q, Allow: func(string) bool { return false }}); len(hits) != 0 {
		t.Errorf("deny-all returned %v", ids(hits))
	}
}

func TestSearchK(t *testing.T) {
	ix := newSmall(t)
	if n := len(ix.Search(Query{Text: "issue repository project ticket file", K: 2})); n != 2 {
		t.Errorf("K=2 returned %d", n)
	}
	ix2 := New(Config{DefaultK: 3})
	for _, d := range smallCatalog() {
		ix2.Upsert(d)
	}
	if n := len(ix2.Search(Query{Text: "issue repository project ticket file"})); n != 3 {
		t.Errorf("DefaultK=3 returned %d", n)
	}
}

func TestSearchTiesByID(t *testing.T) {
	ix := New(Config{})
	for _, id := range []string{"c__same", "a__same", "b__same"} {
		ix.Upsert(Doc{ID: id, Server: "srv", Name: "same", Description: "Identical tool text."})
	}
	for i := range 10 {
		ix.Upsert(Doc{ID: fmt.Sprintf("z__other%d", i), Server: "other", Name: "other", Description: "Unrelated."})
	}
	for range 5 {
		got := ids(ix.Search(Query{Text: "identical tool", K: 2}))
		if want := []string{"a__same", "b__same"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestUpsertRemove(t *testing.T) {
	ix := newSmall(t)
	n := ix.Len()
	ix.Upsert(Doc{ID: "weather__get_forecast", Server: "weather", Name: "get_forecast", Description: "Tide tables for a harbour."})
	if ix.Len() != n {
		t.Errorf("replace changed Len from %d to %d", n, ix.Len())
	}
	if hits := ix.Search(Query{Text: "weather forecast city"}); slices.Contains(ids(hits), "weather__get_forecast") && hits[0].ID == "weather__get_forecast" && hits[0].Score > 0 {
		// Still findable by its name, but not by the old description.
		if h := ix.Search(Query{Text: "city"}); slices.Contains(ids(h), "weather__get_forecast") {
			t.Errorf("old description still indexed: %v", ids(h))
		}
	}
	if hits := ix.Search(Query{Text: "harbour tides"}); len(hits) == 0 || hits[0].ID != "weather__get_forecast" {
		t.Errorf("new description not indexed: %v", ids(hits))
	}
	ix.Remove("weather__get_forecast")
	ix.Remove("no__such_tool")
	if ix.Len() != n-1 {
		t.Errorf("Len after Remove = %d, want %d", ix.Len(), n-1)
	}
	if hits := ix.Search(Query{Text: "harbour tides get_forecast weather__get_forecast"}); slices.Contains(ids(hits), "weather__get_forecast") {
		t.Errorf("removed tool returned: %v", ids(hits))
	}
	// The server went with its last tool; a new one can take its name.
	ix.Upsert(Doc{ID: "weather__now", Server: "weather", ServerDescription: "Meteorology service.", Name: "now", Description: "Current conditions."})
	if hits := ix.Search(Query{Text: "meteorology current conditions"}); len(hits) == 0 || hits[0].ID != "weather__now" {
		t.Errorf("got %v", ids(hits))
	}
}

// TestCompaction churns far more tools than stay, so slots and terms are
// reclaimed, and checks that the index still answers like a fresh one.
func TestCompaction(t *testing.T) {
	ix := New(Config{})
	fresh := New(Config{})
	for i := range 5000 {
		ix.Upsert(Doc{ID: fmt.Sprintf("tmp__t%d", i), Server: fmt.Sprintf("tmp%d", i%7), Name: fmt.Sprintf("t%d", i),
			Description: fmt.Sprintf("ephemeral word%d token%d", i, i%13)})
	}
	for i := range 5000 {
		ix.Remove(fmt.Sprintf("tmp__t%d", i))
	}
	for _, d := range smallCatalog() {
		ix.Upsert(d)
		fresh.Upsert(d)
	}
	for i := 0; i < 5000; i += 2 { // replace one tool many times
		ix.Upsert(Doc{ID: "fs__read_file", Server: "fs", ServerDescription: "Local filesystem.", Name: "read_file",
			Description: fmt.Sprintf("Read the contents of a file. rev%d", i), Params: []Param{{"path", "File path"}}, Tags: []string{"read-only"}})
	}
	ix.Upsert(smallCatalog()[6])
	if ix.Len() != fresh.Len() {
		t.Fatalf("Len %d, want %d", ix.Len(), fresh.Len())
	}
	if len(ix.docs) > 2*ix.Len()+1100 {
		t.Errorf("%d slots for %d tools: not compacted", len(ix.docs), ix.Len())
	}
	// About 22,000 distinct terms went through; compaction keeps those of
	// live tools and of at most ~1024 removed ones.
	if len(ix.dict) > 5000 {
		t.Errorf("dictionary holds %d terms after churn: not compacted", len(ix.dict))
	}
	for _, q := range []string{"create issue", "read file", "ephemeral word17", "weather", "rev42"} {
		a, b := ix.Search(Query{Text: q}), fresh.Search(Query{Text: q})
		if !slices.Equal(ids(a), ids(b)) {
			t.Errorf("%q: churned index %v, fresh %v", q, ids(a), ids(b))
		}
	}
}

func TestConcurrentReadWrite(t *testing.T) {
	ix := newSmall(t)
	docs := smallCatalog()
	var wg sync.WaitGroup
	var stop atomic.Bool
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r)))
			queries := []string{"create issue", "read file", "weather", "搜索", "getLogs", "gitlab__create_issue"}
			for !stop.Load() {
				hits := ix.Search(Query{Text: queries[rng.Intn(len(queries))], Allow: func(id string) bool { return id != "fs__read_file" }})
				for _, h := range hits {
					if h.ID == "fs__read_file" {
						t.Error("rejected tool returned")
					}
				}
				_ = ix.Len()
			}
		}()
	}
	for i := range 3000 {
		d := docs[i%len(docs)]
		if i%3 == 0 {
			ix.Remove(d.ID)
		}
		d.Description = fmt.Sprintf("%s v%d", d.Description, i)
		ix.Upsert(d)
	}
	stop.Store(true)
	wg.Wait()
	if ix.Len() != len(docs) {
		t.Errorf("Len %d, want %d", ix.Len(), len(docs))
	}
}

func TestParamsFromSchema(t *testing.T) {
	schema := `{"type":"object","properties":{
		"query":{"type":"string","description":"Search keywords"},
		"options":{"type":"object","title":"Options","properties":{"limit":{"type":"integer","description":"Max results"}}},
		"items":{"type":"array","items":{"type":"object","properties":{"sku":{"description":"Item SKU"}}}},
		"sort":{"anyOf":[{"const":"date","description":"Newest first"},{"const":"stars"}]},
		"mode":{"enum":["fast","exact",3,null]},
		"odd":5}}`
	got := ParamsFromSchema(json.RawMessage(schema))
	want := []Param{
		{"items", ""}, {"items.sku", "Item SKU"}, {"mode", "fast exact"}, {"odd", ""},
		{"options", "Options"}, {"options.limit", "Max results"},
		{"query", "Search keywords"}, {"sort", "Newest first date stars"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParamsFromSchema =\n%q\nwant\n%q", got, want)
	}
}

func TestParamsFromSchemaJunk(t *testing.T) {
	for _, in := range []string{
		"", "null", "[]", "42", `"x"`, "{", `{"properties":5}`, `{"properties":{"a":[1,2]}}`,
		`{"properties":null}`, `{"properties":{"a":{"properties":{"b":{"properties":{"c":{}}}}}}}`,
		`{"properties":{"a":{"anyOf":"x","enum":{},"description":7}}}`,
	} {
		_ = ParamsFromSchema(json.RawMessage(in)) // must not panic
	}
	if got := ParamsFromSchema(nil); got != nil {
		t.Errorf("nil schema: %v", got)
	}
	// Many properties are capped.
	big := `{"properties":{`
	for i := range 1000 {
		if i > 0 {
			big += ","
		}
		big += fmt.Sprintf(`"p%04d":{"description":"d"}`, i)
	}
	big += "}}"
	if n := len(ParamsFromSchema(json.RawMessage(big))); n != maxParams {
		t.Errorf("got %d params, want the cap %d", n, maxParams)
	}
	// Random bytes.
	rng := rand.New(rand.NewSource(7))
	for range 2000 {
		b := make([]byte, rng.Intn(64))
		rng.Read(b)
		_ = ParamsFromSchema(b)
	}
}

func TestHostileDoc(t *testing.T) {
	ix := newSmall(t)
	before := ids(ix.Search(Query{Text: "create issue"}))
	huge := make([]byte, 4<<20)
	rand.New(rand.NewSource(3)).Read(huge)
	ix.Upsert(Doc{ID: "evil__tool", Server: "evil", Name: string(huge[:1000]), Description: string(huge),
		ServerDescription: string(huge), Params: []Param{{string(huge[:5000]), string(huge)}}, Tags: []string{string(huge)}})
	if hits := ix.Search(Query{Text: string(huge[:100000])}); len(hits) > 10 {
		t.Errorf("got %d hits", len(hits))
	}
	if after := ids(ix.Search(Query{Text: "create issue"})); !slices.Equal(before, after) {
		t.Errorf("catalog disturbed: %v, was %v", after, before)
	}
}

func TestSearchFileIntent(t *testing.T) {
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "chart__bar_chart", Server: "chart", ServerDescription: "Charts.",
		Name: "generate_bar_chart", Description: "Generate a bar chart and save it as a PNG image.",
		Params: []Param{{"data", "Values"}, {"output", "Output image path"}}})
	ix.Upsert(Doc{ID: "fs2__save_file", Server: "fs2", ServerDescription: "Another filesystem.",
		Name: "save_file", Description: "Save text to disk."})
	tests := []struct {
		q     string
		first string // "" when no file operation should lead
	}{
		// A verb of writing with a text file: a write tool leads (save_file
		// matches "save" itself).
		{"get the weather forecast for Paris and save it to /root/notes/paris.md", "fs2__save_file"},
		{"get the weather forecast for Paris and write it to /root/notes/paris.md", "fs__write_file"},
		// A verb of reading with a text file.
		{"open /var/log/app.log and create an issue about the errors", "fs__read_file"},
		// A binary format has tools of its own: nothing is forced first.
		{"plot a bar chart of the sales and save it to /root/figs/sales.png", ""},
		// An exact mention stays first.
		{"github__list_issues then write them to issues.txt", "github__list_issues"},
	}
	for _, tt := range tests {
		hits := ix.Search(Query{Text: tt.q})
		if len(hits) == 0 {
			t.Errorf("%q: no hits", tt.q)
			continue
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Errorf("%q: scores not ordered: %v", tt.q, hits)
			}
		}
		if tt.first != "" && hits[0].ID != tt.first {
			t.Errorf("%q: first %s, want %s (all %v)", tt.q, hits[0].ID, tt.first, ids(hits))
		}
		if tt.first == "" && (hits[0].ID == "fs__write_file" || hits[0].ID == "fs2__save_file") {
			t.Errorf("%q: a file write leads: %v", tt.q, ids(hits))
		}
	}
	// A verb in a path is an argument, not a verb: "export" here implies no
	// file write.
	if got := ids(ix.Search(Query{Text: "open /var/export/app.log and create an issue about the errors", K: 3})); len(got) < 2 ||
		got[0] != "fs__read_file" || slices.Contains(got, "fs__write_file") || slices.Contains(got, "fs2__save_file") {
		t.Errorf("a verb in a path: got %v, want fs__read_file first and no write tool", got)
	}
	// The write tool of the catalog that Allow permits fills the place,
	// found by a search for the operation alone when the request's own
	// ranking has none; Allow still runs once per tool.
	calls := map[string]int{}
	allow := func(id string) bool { calls[id]++; return id != "fs2__save_file" }
	hits := ix.Search(Query{Text: "get the weather forecast for Paris and save it to /root/notes/paris.md", Allow: allow})
	if len(hits) == 0 || hits[0].ID != "fs__write_file" {
		t.Errorf("with fs2__save_file denied: got %v, want fs__write_file first", ids(hits))
	}
	// K = 1: the head holds no write tool, a search for the operation
	// alone finds it, sharing the Allow verdicts.
	hits = ix.Search(Query{Text: "get the weather forecast for Paris and write it to /root/notes/paris.md", K: 1, Allow: allow})
	if !slices.Equal(ids(hits), []string{"fs__write_file"}) {
		t.Errorf("K=1: got %v, want [fs__write_file]", ids(hits))
	}
	for id, n := range calls {
		if n > 2 { // once per search
			t.Errorf("Allow called %d times for %s in two searches", n, id)
		}
	}
	// The words of the operation leave the rest of the ranking: a tool that
	// merely writes something (a note) no longer comes before the tool for
	// the rest of the request, as it does when they stay.
	ix.Upsert(Doc{ID: "notes__write_note", Server: "notes", ServerDescription: "A knowledge base of notes.",
		Name: "write_note", Description: "Write a note to the knowledge base.",
		Params: []Param{{"title", "Note title"}, {"content", "Note text"}}})
	keep := New(Config{FileIntentKeepsWords: true})
	for _, d := range append(smallCatalog(), Doc{ID: "notes__write_note", Server: "notes", ServerDescription: "A knowledge base of notes.",
		Name: "write_note", Description: "Write a note to the knowledge base.",
		Params: []Param{{"title", "Note title"}, {"content", "Note text"}}}) {
		keep.Upsert(d)
	}
	q := "write the forecast for Paris to /root/notes/paris.md"
	if got := ids(ix.Search(Query{Text: q, K: 3})); !slices.Equal(got[:2], []string{"fs__write_file", "weather__get_forecast"}) {
		t.Errorf("%q: got %v, want fs__write_file then weather__get_forecast", q, got)
	}
	if got := ids(keep.Search(Query{Text: q, K: 3})); !slices.Equal(got[:2], []string{"fs__write_file", "notes__write_note"}) {
		t.Errorf("%q, words kept: got %v, want fs__write_file then notes__write_note", q, got)
	}
	// No tool named for the operation (none in the catalog, or none that
	// Allow permits): its words stay, and find what they can.
	noFS := New(Config{})
	for _, d := range smallCatalog() {
		if d.Server != "fs" {
			noFS.Upsert(d)
		}
	}
	noFS.Upsert(Doc{ID: "notes__save_note", Server: "notes", ServerDescription: "A knowledge base of notes.",
		Name: "save_note", Description: "Save a note to the knowledge base."})
	q = "get the weather forecast for Paris and save it to /root/paris.md"
	if got := ids(noFS.Search(Query{Text: q, K: 3})); !slices.Contains(got, "notes__save_note") {
		t.Errorf("%q without a file tool: got %v, want notes__save_note among them", q, got)
	}
	noWrite := func(id string) bool { return id != "fs__write_file" && id != "fs2__save_file" }
	ix.Upsert(Doc{ID: "notes__save_note", Server: "notes", ServerDescription: "A knowledge base of notes.",
		Name: "save_note", Description: "Save a note to the knowledge base."})
	if got := ids(ix.Search(Query{Text: q, K: 3, Allow: noWrite})); !slices.Contains(got, "notes__save_note") {
		t.Errorf("%q with the file tools denied: got %v, want notes__save_note among them", q, got)
	}
	// Switched off, nothing is forced.
	off := New(Config{FileIntentWeight: -1})
	for _, d := range smallCatalog() {
		off.Upsert(d)
	}
	if hits := off.Search(Query{Text: "get the weather forecast for Paris and save it to /root/notes/paris.md"}); len(hits) == 0 || hits[0].ID != "weather__get_forecast" {
		t.Errorf("file intent off: got %v, want weather__get_forecast first", ids(hits))
	}
}

func TestSearchTranslations(t *testing.T) {
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "hub__get_rank", Server: "hub", ServerDescription: "热点趋势",
		Name: "get_rank", Description: "获取新闻热榜，包含时事热点"})
	// A request in English finds a tool described in Chinese ...
	if got := ids(ix.Search(Query{Text: "top news stories"})); len(got) == 0 || got[0] != "hub__get_rank" {
		t.Errorf("top news stories: got %v, want hub__get_rank first", got)
	}
	// ... and one in Chinese, tools described in English.
	if got := ids(ix.Search(Query{Text: "创建问题"})); len(got) < 2 || !slices.Equal(slices.Sorted(slices.Values(got[:2])),
		[]string{"github__create_issue", "gitlab__create_issue"}) {
		t.Errorf("创建问题: got %v, want the two create_issue tools first", got)
	}
	// Switched off, neither is found.
	off := New(Config{TranslationWeight: -1})
	for _, d := range smallCatalog() {
		off.Upsert(d)
	}
	off.Upsert(Doc{ID: "hub__get_rank", Server: "hub", ServerDescription: "热点趋势",
		Name: "get_rank", Description: "获取新闻热榜，包含时事热点"})
	for _, q := range []string{"top news stories", "创建问题"} {
		if got := ids(off.Search(Query{Text: q})); slices.Contains(got, "hub__get_rank") || slices.Contains(got, "github__create_issue") {
			t.Errorf("%s, translations off: got %v", q, got)
		}
	}
}

func TestTranslationTable(t *testing.T) {
	words := map[string]bool{}
	for _, g := range relatedGroups {
		for _, w := range strings.Fields(g) {
			words[w] = true
		}
	}
	for en, zh := range zhTranslations {
		if !words[en] {
			t.Errorf("%q is not a word of relatedGroups", en)
		}
		for _, z := range strings.Fields(zh) {
			if utf8.RuneCountInString(z) < 2 || strings.IndexFunc(z, func(r rune) bool { return !isCJK(r) }) >= 0 {
				t.Errorf("%s: %q is not a CJK word of two characters or more", en, z)
			}
		}
	}
	// A word of n bigrams spreads its weight over them.
	var sum float64
	for _, tr := range translations["profil"] {
		sum += tr.share
	}
	if math.Abs(sum-2) > 1e-9 { // 个人资料 (three bigrams) and 档案
		t.Errorf("profile: shares sum to %v, want 2 (%v)", sum, translations["profil"])
	}
	if got := translations["新闻"]; !slices.ContainsFunc(got, func(tr translation) bool { return tr.text == "news" && tr.share == 1 }) {
		t.Errorf("新闻 → %v, want news", got)
	}
}

// TestRemovalLikeFresh removes a whole server set, scattered tools, and replaces others, and
// checks that the index answers exactly (ids and scores) like a fresh one of the tools that
// remain, both while the removed tools' postings wait for compaction and after it.
func TestRemovalLikeFresh(t *testing.T) {
	docs := replicatedDocs(t, 1600)
	queries := benchQueries(t)
	rng := rand.New(rand.NewSource(1))
	ix := New(Config{})
	for _, d := range docs {
		ix.Upsert(d)
	}
	// Words that only removed tools had are gone from the index too: a query using one
	// scores like on an index that never had it.
	for i := range 5 {
		ix.Upsert(Doc{ID: fmt.Sprintf("gone__t%d", i), Server: "gone", Name: fmt.Sprintf("t%d", i), Description: "zyzzyva quokka issue tracker"})
	}
	for i := range 5 {
		ix.Remove(fmt.Sprintf("gone__t%d", i))
	}
	queries = append(queries, "zyzzyva create an issue in github", "quokka issue tracker for a repository")
	var kept []Doc
	for i, d := range docs {
		switch {
		case strings.HasSuffix(d.Server, "-1"): // the first replica's servers, whole
			ix.Remove(d.ID)
		case rng.Intn(10) == 0:
			ix.Remove(d.ID)
		case rng.Intn(10) == 0:
			d.Description = fmt.Sprintf("Replaced tool %d: %s", i, d.Description)
			ix.Upsert(d)
			kept = append(kept, d)
		default:
			kept = append(kept, d)
		}
	}
	compare := func(stage string) {
		t.Helper()
		fresh := New(Config{})
		for _, d := range kept {
			fresh.Upsert(d)
		}
		if ix.Len() != fresh.Len() {
			t.Fatalf("%s: Len %d, want %d", stage, ix.Len(), fresh.Len())
		}
		allow := func(id string) bool { return len(id)%3 != 0 }
		for _, q := range queries {
			for _, a := range []func(string) bool{nil, allow} {
				got, want := ix.Search(Query{Text: q, K: 20, Allow: a}), fresh.Search(Query{Text: q, K: 20, Allow: a})
				if !slices.Equal(got, want) {
					t.Errorf("%s: %q (filtered %v):\n got  %v\n want %v", stage, q, a != nil, got, want)
					return
				}
			}
		}
	}
	dead := len(ix.docs) - ix.Len()
	if dead < 300 {
		t.Fatalf("only %d removed slots pending: the test does not exercise lazy removal", dead)
	}
	compare("removed postings pending")
	ix.mu.Lock()
	ix.compact()
	ix.mu.Unlock()
	if len(ix.docs) != ix.Len() {
		t.Fatalf("after compaction %d slots for %d tools", len(ix.docs), ix.Len())
	}
	compare("compacted")
}
