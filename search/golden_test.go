package search

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// goldenQueries are the benchmark queries (the development queries and short keyword queries)
// and queries that take the other paths of parsing and ranking: file operations, paths, CJK,
// fullwidth, decomposed accents, camelCase and exact names, stop words alone, a hostile length.
func goldenQueries(t testing.TB) []string {
	return append(benchQueries(t),
		"get the weather forecast for Paris and save it to /root/notes/paris.md",
		"get the weather forecast for Paris and write it to /root/notes/paris.md",
		"open /var/log/app.log and create an issue about the errors",
		"github__list_issues then write them to issues.txt",
		"plot a bar chart of the sales and save it to /root/figs/sales.png",
		"read /etc/hosts", "save the report to /tmp/report.md; then export it to notes/",
		"CI/CD pipeline and/or TCP/IP, 12/25/2026 src/main/notes",
		"use create_issue please", "GitHub__Create_Issue", "github repository issue owner repo gitlab__create_issue",
		"getLogs", "listS3Buckets getEC2Instances", "items.sku options.limit",
		"ＧｉｔＨｕｂ ｉｓｓｕｅ", "创建问题", "必应搜索关键词", "天気予報を取得して、ファイルに保存",
		"cafe\u0301 re\u0301sume\u0301 naïve", "Überprüfe die Wettervorhersage für Paris",
		"the and of to", "", "   ", "a", "APIs HTTPServer CNNs",
		strings.Repeat("search the web for news and then summarize it. ", 200),
	)
}

// TestRankedGolden: a fixed set of queries returns exactly the stored ranked results and scores
// (to the last bit), over the real catalog unfiltered, filtered (Allow), with the statistics of
// the visible tools (Visible), fused with vectors, over a replicated catalog of 1k tools ranked
// deeper, and over the small catalog. Any change to parsing or ranking that is meant to keep
// results identical must keep this file; one meant to change them rewrites it (-update) and
// the evaluation shows what it changed.
func TestRankedGolden(t *testing.T) {
	tools, _ := loadEval(t)
	half := func(id string) bool { return len(id)%2 == 0 }
	build := func(docs []Doc, dims int) *Index {
		ix := New(Config{})
		for _, d := range docs {
			if dims > 0 {
				d.Vector = hashVector(docText(d), dims)
			}
			ix.Upsert(d)
		}
		return ix
	}
	real, hybrid := build(catalogDocs(tools, ""), 0), build(catalogDocs(tools, ""), 64)
	rep, small := build(replicatedDocs(t, 1_000), 0), build(smallCatalog(), 0)
	modes := []struct {
		name string
		ix   *Index
		q    func(text string) Query
	}{
		{"real", real, func(s string) Query { return Query{Text: s, K: 10} }},
		{"real-allow", real, func(s string) Query { return Query{Text: s, K: 10, Allow: half} }},
		{"real-visible", real, func(s string) Query {
			return Query{Text: s, K: 10, Allow: half, Visible: half, VisibleKey: "half"}
		}},
		{"real-hybrid", hybrid, func(s string) Query { return Query{Text: s, K: 10, Vector: hashVector(s, 64)} }},
		{"1k-k25", rep, func(s string) Query { return Query{Text: s, K: 25} }},
		{"small", small, func(s string) Query { return Query{Text: s} }},
	}
	var b strings.Builder
	for _, m := range modes {
		for _, text := range goldenQueries(t) {
			label := text
			if len(label) > 200 {
				label = fmt.Sprintf("%s… (%d bytes)", label[:200], len(text))
			}
			fmt.Fprintf(&b, "%s %s\n", m.name, strconv.Quote(label))
			for _, h := range m.ix.Search(m.q(text)) {
				fmt.Fprintf(&b, "\t%s %s\n", h.ID, strconv.FormatFloat(h.Score, 'g', -1, 64))
			}
		}
	}
	got := b.String()
	path := filepath.Join("testdata", "ranked.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				// The query the first difference is under.
				q := ""
				for j := i; j >= 0; j-- {
					if !strings.HasPrefix(wl[j], "\t") {
						q = wl[j]
						break
					}
				}
				t.Fatalf("ranked results differ from %s at line %d (under %s):\n got %q\nwant %q", path, i+1, q, gl[i], wl[i])
			}
		}
		t.Fatalf("ranked results differ from %s: %d lines, want %d", path, len(gl), len(wl))
	}
}

// TestConcurrentSearchesAsAlone: searches running at once, which share the pooled memory of
// parsing and ranking (a file operation's search nests a second parse and scratch), each return
// what the same search returns alone.
func TestConcurrentSearchesAsAlone(t *testing.T) {
	tools, _ := loadEval(t)
	ix := New(Config{})
	for _, d := range catalogDocs(tools, "") {
		ix.Upsert(d)
	}
	half := func(id string) bool { return len(id)%2 == 0 }
	queries := goldenQueries(t)
	query := func(i int) Query {
		q := Query{Text: queries[i%len(queries)], K: 10}
		if i%3 == 1 {
			q.Allow = half
		}
		return q
	}
	want := make([][]Hit, 2*len(queries))
	for i := range want {
		want[i] = ix.Search(query(i))
	}
	errs := make(chan string, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 3 {
				for j := range want {
					i := (j*7 + g*13 + r) % len(want)
					if got := ix.Search(query(i)); !slices.Equal(got, want[i]) {
						errs <- fmt.Sprintf("%q: %v, alone %v", query(i).Text, got, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
