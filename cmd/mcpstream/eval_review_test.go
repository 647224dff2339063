package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/search"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEvalRetrievalHostileInputs: input files that cannot give meaningful figures are refused
// with an error that names the file (and the line) instead of printing figures. An empty file,
// a catalog listing the same tool twice (which description is the tool's?), a gold id that is
// not in the catalog (a typo counted as a miss, silently lowering every figure), an empty gold
// group (a group no result can satisfy) and queries of which none has gold all printed figures
// and exited 0; a line over the reader's limit was reported without its line number.
func TestEvalRetrievalHostileInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tool := func(server, name string) string {
		return fmt.Sprintf(`{"id":"%s::%s","server":%q,"name":%q,"description":"d %s"}`+"\n", server, name, server, name, name)
	}
	tools := write("tools.jsonl", tool("kb", "search")+tool("kb", "get")+tool("bing.cn", "bing_search"))
	queries := write("queries.jsonl", `{"id":"q1","query":"search","gold_groups":[["kb::search"]]}`+"\n")
	tests := []struct {
		name           string
		tools, queries string
		want           []string
	}{
		{"empty tools file", write("empty-tools.jsonl", ""), queries, []string{"empty-tools.jsonl", "no tools"}},
		{"blank tools file", write("blank-tools.jsonl", "\n  \n"), queries, []string{"blank-tools.jsonl", "no tools"}},
		{"empty queries file", tools, write("empty-queries.jsonl", ""), []string{"empty-queries.jsonl", "no queries"}},
		{"no query with gold", tools, write("nogold.jsonl", `{"id":"q","query":"search","gold_groups":[]}`+"\n"),
			[]string{"nogold.jsonl", "gold"}},
		{"duplicate tool", write("dup.jsonl", tool("kb", "search")+"\n"+tool("kb", "get")+tool("kb", "search")), queries,
			[]string{"dup.jsonl:4", `"kb::search"`, "line 1"}},
		{"unknown gold tool", tools, write("unknown.jsonl", `{"id":"q1","query":"search","gold_groups":[["kb::search"]]}`+"\n"+
			`{"id":"q2","query":"search","gold_groups":[["kb::search","kb::serach"]]}`+"\n"),
			[]string{"unknown.jsonl:2", `"kb::serach"`, "not in the catalog"}},
		{"unknown gold_tools", tools, write("unknown-tools.jsonl", `{"id":"q1","query":"search","gold_tools":["nope::x"]}`+"\n"),
			[]string{"unknown-tools.jsonl:1", `"nope::x"`, "not in the catalog"}},
		{"empty gold group", tools, write("emptygroup.jsonl", `{"id":"q1","query":"search","gold_groups":[["kb::search"],[]]}`+"\n"),
			[]string{"emptygroup.jsonl:1", "empty"}},
		{"invalid JSON on line 3", write("invalid.jsonl", tool("kb", "search")+"\n"+`{"id":"x",`+"\n"), queries,
			[]string{"invalid.jsonl:3"}},
		{"missing name", write("noname.jsonl", tool("kb", "search")+`{"id":"kb::x","server":"kb"}`+"\n"), queries,
			[]string{"noname.jsonl:2", `"name"`}},
		{"missing query", tools, write("noquery.jsonl", `{"id":"q1","gold_groups":[["kb::search"]]}`+"\n"),
			[]string{"noquery.jsonl:1", `"query"`}},
		{"huge line", write("huge.jsonl", tool("kb", "search")+tool("kb", "get")+
			`{"id":"kb::big","server":"kb","name":"big","description":"`+strings.Repeat("a", 17<<20)+`"}`+"\n"), queries,
			[]string{"huge.jsonl:3", "too long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := catRun(t, "eval", "retrieval", "--tools", tt.tools, "--queries", tt.queries, "--json")
			if err == nil {
				t.Fatalf("no error; printed %s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// referenceMetrics computes PROVENANCE.md's metrics independently of search.Evaluate, over
// catalog ids ("server::name"): results best first, gold as any-of groups.
func referenceMetrics(results [][]string, gold [][][]string) search.Metrics {
	var m search.Metrics
	for i, groups := range gold {
		if len(groups) == 0 {
			continue
		}
		m.Queries++
		res := results[i]
		// rankOf is the 1-based position of the first result in set, 0 if none within the first n.
		rankOf := func(set []string, n int) int {
			for r := 0; r < len(res) && r < n; r++ {
				if slices.Contains(set, res[r]) {
					return r + 1
				}
			}
			return 0
		}
		recall := func(k int) (share float64, all bool) {
			hit := 0
			for _, g := range groups {
				if rankOf(g, k) > 0 {
					hit++
				}
			}
			return float64(hit) / float64(len(groups)), hit == len(groups)
		}
		r1, _ := recall(1)
		r5, c5 := recall(5)
		r10, c10 := recall(10)
		m.RecallAt1 += r1
		m.RecallAt5 += r5
		m.RecallAt10 += r10
		if c5 {
			m.CompleteAt5++
		}
		if c10 {
			m.CompleteAt10++
		}
		var dcg, idcg float64
		for j, g := range groups {
			if r := rankOf(g, 10); r > 0 {
				dcg += 1 / math.Log2(float64(r+1))
			}
			if j < 10 {
				idcg += 1 / math.Log2(float64(j+2))
			}
		}
		m.NDCGAt10 += dcg / idcg
		var all []string
		for _, g := range groups {
			all = append(all, g...)
		}
		if r := rankOf(all, len(res)); r > 0 {
			m.MRR += 1 / float64(r)
		}
	}
	q := float64(m.Queries)
	for _, p := range []*float64{&m.RecallAt1, &m.RecallAt5, &m.RecallAt10, &m.CompleteAt5, &m.CompleteAt10, &m.NDCGAt10, &m.MRR} {
		*p /= q
	}
	return m
}

func metricsNear(a, b search.Metrics) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Queries == b.Queries && near(a.RecallAt1, b.RecallAt1) && near(a.RecallAt5, b.RecallAt5) &&
		near(a.RecallAt10, b.RecallAt10) && near(a.CompleteAt5, b.CompleteAt5) && near(a.CompleteAt10, b.CompleteAt10) &&
		near(a.NDCGAt10, b.NDCGAt10) && near(a.MRR, b.MRR)
}

// TestEvalRetrievalReference runs a hand-made catalog through the real path (registry events,
// an indexer replica, catalog search over NATS) and checks the printed figures against values
// computed by hand (each query's words match known tools only, so what can be found is known)
// and against an independent computation over the ranked results the path returned.
func TestEvalRetrievalReference(t *testing.T) {
	dir := t.TempDir()
	// Each tool carries one made-up word no other tool has.
	type tl struct{ server, name, word string }
	catalog := []tl{
		{"alpha", "zorblax_tool", "zorblax"},
		{"alpha", "quiggle_tool", "quiggle"},
		{"beta.cn", "fnord_tool", "fnord"},
		{"beta.cn", "wibble_tool", "wibble"},
		{"gamma", "plonk_tool", "plonk"},
		{"gamma", "snark_tool", "snark"},
	}
	var tb strings.Builder
	for _, c := range catalog {
		fmt.Fprintf(&tb, `{"id":"%s::%s","server":%q,"server_description":"a test server","name":%q,"description":"%s does it","inputSchema":{"type":"object"}}`+"\n",
			c.server, c.name, c.server, c.name, c.word)
	}
	tools := filepath.Join(dir, "tools.jsonl")
	os.WriteFile(tools, []byte(tb.String()), 0o644)
	queries := filepath.Join(dir, "queries.jsonl")
	os.WriteFile(queries, []byte(strings.Join([]string{
		// One group, found alone: all figures 1.
		`{"id":"one","query":"zorblax","gold_groups":[["alpha::zorblax_tool"]]}`,
		// Two groups, both found at ranks 1 and 2 in some order.
		`{"id":"two","query":"quiggle fnord","gold_groups":[["alpha::quiggle_tool"],["beta.cn::fnord_tool"]]}`,
		// One group of two members, both found: the group counts once, at rank 1.
		`{"id":"anyof","query":"wibble plonk","gold_groups":[["beta.cn::wibble_tool","gamma::plonk_tool"]]}`,
		// gold_tools, each its own group; only snark is found.
		`{"id":"tools","query":"snark","gold_tools":["gamma::snark_tool","alpha::zorblax_tool"]}`,
		// Nothing found.
		`{"id":"none","query":"xylophone","gold_groups":[["gamma::plonk_tool"]]}`,
		// No gold: searched, not counted.
		`{"id":"nogold","query":"zorblax"}`,
	}, "\n")+"\n"), 0o644)

	lg := math.Log2
	run := func(k int) (search.Metrics, evalResult) {
		t.Helper()
		out, errOut, err := catRun(t, "eval", "retrieval", "--tools", tools, "--queries", queries, "--json", "--k", fmt.Sprint(k))
		if err != nil {
			t.Fatalf("eval --k %d: %v\n%s", k, err, errOut)
		}
		var m search.Metrics
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		// The same through evalRetrieval, for the ranked results.
		var ts []evalTool
		for _, c := range catalog {
			ts = append(ts, evalTool{ID: c.server + "::" + c.name, Server: c.server, Name: c.name, Description: c.word + " does it"})
		}
		qs, err := readJSONLines(queries, func(evalQuery, int) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		var warn bytes.Buffer
		res, err := evalRetrieval(t.Context(), ts, qs, k, nil, &warn)
		if err != nil {
			t.Fatal(err)
		}
		// Independent: map the public names back to catalog ids and score with the reference.
		byPublic := map[string]string{}
		for _, c := range catalog {
			byPublic[subjects.PublicName(c.server, c.name)] = c.server + "::" + c.name
		}
		var results [][]string
		var gold [][][]string
		for i, q := range qs {
			if len(res.results[i]) > k {
				t.Errorf("query %s: %d results for k %d", q.ID, len(res.results[i]), k)
			}
			var ids []string
			for _, n := range res.results[i] {
				id, ok := byPublic[n]
				if !ok {
					t.Fatalf("query %s: result %q is no catalog tool", q.ID, n)
				}
				if slices.Contains(ids, id) {
					t.Errorf("query %s: %q twice in the results", q.ID, n)
				}
				ids = append(ids, id)
			}
			results = append(results, ids)
			groups := q.GoldGroups
			if len(groups) == 0 {
				for _, id := range q.GoldTools {
					groups = append(groups, []string{id})
				}
			}
			gold = append(gold, groups)
		}
		if ref := referenceMetrics(results, gold); !metricsNear(m, ref) || !metricsNear(res.metrics, ref) {
			t.Errorf("k %d: printed %+v\nreference %+v over %q", k, m, ref, results)
		}
		return m, res
	}

	// k = 10: one 1s; two: recall@1 1/2, the rest 1; anyof 1s; tools: 1/2 everywhere but
	// recall@1 1/2, complete 0, nDCG 1/(1+1/lg 3), MRR 1; none 0s.
	m, _ := run(10)
	want := search.Metrics{Queries: 5,
		RecallAt1: (1 + 0.5 + 1 + 0.5 + 0) / 5, RecallAt5: (1 + 1 + 1 + 0.5) / 5, RecallAt10: (1 + 1 + 1 + 0.5) / 5,
		CompleteAt5: 3.0 / 5, CompleteAt10: 3.0 / 5,
		NDCGAt10: (1 + 1 + 1 + 1/(1+1/lg(3))) / 5, MRR: 4.0 / 5}
	if !metricsNear(m, want) {
		t.Errorf("k 10:\n got  %+v\n want %+v", m, want)
	}
	// k = 1, fewer results than "two" has groups: it can find only one of them.
	m, _ = run(1)
	want = search.Metrics{Queries: 5,
		RecallAt1: (1 + 0.5 + 1 + 0.5) / 5, RecallAt5: (1 + 0.5 + 1 + 0.5) / 5, RecallAt10: (1 + 0.5 + 1 + 0.5) / 5,
		CompleteAt5: 2.0 / 5, CompleteAt10: 2.0 / 5,
		NDCGAt10: (1 + 1/(1+1/lg(3)) + 1 + 1/(1+1/lg(3))) / 5, MRR: 4.0 / 5}
	if !metricsNear(m, want) {
		t.Errorf("k 1:\n got  %+v\n want %+v", m, want)
	}
}
