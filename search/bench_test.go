package search

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// replicatedDocs replicates the real catalog to n tools, renaming servers
// ("github" → "github-17") so every copy is a distinct, realistic server.
func replicatedDocs(tb testing.TB, n int) []Doc {
	tb.Helper()
	tools, _ := loadEval(tb)
	docs := make([]Doc, 0, n)
	for r := 0; len(docs) < n; r++ {
		suffix := ""
		if r > 0 {
			suffix = fmt.Sprintf("-%d", r)
		}
		for _, d := range catalogDocs(tools, suffix) {
			if len(docs) == n {
				break
			}
			docs = append(docs, d)
		}
	}
	return docs
}

// benchQueries are the dev queries (long natural-language requests) plus
// short keyword queries, the two shapes search_tools sees.
func benchQueries(tb testing.TB) []string {
	_, qs := loadEval(tb)
	out := make([]string, 0, len(qs)+10)
	for _, q := range qs {
		out = append(out, q.Query)
	}
	return append(out, "create issue", "get weather", "search papers arxiv",
		"write_file", "read pdf", "stock price", "geocode address",
		"convert docx to pdf", "github__create_issue", "获取热榜")
}

func benchSearch(b *testing.B, n int) { benchSearchVec(b, n, 0) }

// benchSearchVec measures searches of an index of n tools; with dims > 0,
// every tool has a vector of that dimension (hashVector of its text) and
// every query one too (hybrid search).
func benchSearchVec(b *testing.B, n, dims int) {
	docs := replicatedDocs(b, n)
	ix := New(Config{})
	for _, d := range docs {
		if dims > 0 {
			d.Vector = hashVector(docText(d), dims)
		}
		ix.Upsert(d)
	}
	queries := benchQueries(b)
	qvecs := make([][]float32, len(queries))
	if dims > 0 {
		for i, q := range queries {
			qvecs[i] = hashVector(q, dims)
		}
	}
	// Wall-clock latency, and CPU time of the searching thread, which the
	// other processes of a shared machine do not inflate.
	wall := make([]time.Duration, 0, b.N)
	cpu := make([]time.Duration, 0, b.N)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c0, t0 := threadCPU(), time.Now()
		ix.Search(Query{Text: queries[i%len(queries)], K: 10, Vector: qvecs[i%len(queries)]})
		wall = append(wall, time.Since(t0))
		cpu = append(cpu, threadCPU()-c0)
	}
	b.StopTimer()
	report := func(d []time.Duration, unit string) {
		if len(d) == 0 {
			return
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), unit+"-p50-µs")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), unit+"-p99-µs")
	}
	report(wall, "wall")
	if slices.Max(cpu) > 0 {
		report(cpu, "cpu")
	}
}

func BenchmarkSearch1k(b *testing.B)   { benchSearch(b, 1_000) }
func BenchmarkSearch10k(b *testing.B)  { benchSearch(b, 10_000) }
func BenchmarkSearch100k(b *testing.B) { benchSearch(b, 100_000) }

// BenchmarkSearch10kVector is BenchmarkSearch10k with hybrid search: every
// tool and query has a 384-dimension vector (a brute-force scan of 10k).
func BenchmarkSearch10kVector(b *testing.B) { benchSearchVec(b, 10_000, 384) }

// BenchmarkSearch10kAllow measures the cost of a permission filter that
// rejects half the tools.
func BenchmarkSearch10kAllow(b *testing.B) {
	docs := replicatedDocs(b, 10_000)
	ix := New(Config{})
	for _, d := range docs {
		ix.Upsert(d)
	}
	queries := benchQueries(b)
	allow := func(id string) bool { return len(id)%2 == 0 }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ix.Search(Query{Text: queries[i%len(queries)], K: 10, Allow: allow})
	}
}

// BenchmarkSearch10kVisible is BenchmarkSearch10kAllow with the statistics of
// the visible tools (Query.Visible, the same half): "cached" searches an
// unchanged index (the statistics computed once), "after-write" writes a tool
// before each search, so every search computes them again (a pass over the
// 10k tools), as the first search of each visibility class does after a
// catalog change.
func BenchmarkSearch10kVisible(b *testing.B) {
	docs := replicatedDocs(b, 10_000)
	ix := New(Config{})
	for _, d := range docs {
		ix.Upsert(d)
	}
	queries := benchQueries(b)
	allow := func(id string) bool { return len(id)%2 == 0 }
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ix.Search(Query{Text: queries[i%len(queries)], K: 10, Allow: allow, Visible: allow, VisibleKey: "half"})
		}
	})
	b.Run("after-write", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ix.Upsert(docs[i%len(docs)])
			ix.Search(Query{Text: queries[i%len(queries)], K: 10, Allow: allow, Visible: allow, VisibleKey: "half"})
		}
	})
}

// BenchmarkUpsert measures index build throughput on a 100k catalog (each
// op is one Upsert; the index is rebuilt every 100k ops).
func BenchmarkUpsert(b *testing.B) {
	docs := replicatedDocs(b, 100_000)
	ix := New(Config{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%len(docs) == 0 && i > 0 {
			ix = New(Config{})
		}
		ix.Upsert(docs[i%len(docs)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "upserts/s")
}

// BenchmarkReplace measures Upsert of an ID already present (remove + add)
// in a 10k index.
func BenchmarkReplace(b *testing.B) {
	docs := replicatedDocs(b, 10_000)
	ix := New(Config{})
	for _, d := range docs {
		ix.Upsert(d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ix.Upsert(docs[i%len(docs)])
	}
}

// BenchmarkMemory100k reports the heap the index holds per tool at 100k
// tools (the input Docs excluded). It builds the index once, whatever b.N.
func BenchmarkMemory100k(b *testing.B) {
	docs := replicatedDocs(b, 100_000)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ix := New(Config{})
	for _, d := range docs {
		ix.Upsert(d)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for b.Loop() {
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(ix.Len()), "bytes/doc")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(docs)
}

// BenchmarkRemoveServer measures removing one large server (20k tools, each op removes all of
// them) from an index of 40k: a removal costs the tool's own terms, not the length of the
// postings lists it is in (splicing those made this quadratic: ~0.4 s at 20k, 6.8 s at 80k).
func BenchmarkRemoveServer(b *testing.B) {
	docs := replicatedDocs(b, 20_000)
	big := make([]Doc, 20_000)
	for i := range big {
		big[i] = Doc{ID: fmt.Sprintf("big__tool_%05d", i), Server: "big", ServerDescription: "one large server",
			Name: fmt.Sprintf("tool_%05d", i), Description: fmt.Sprintf("does thing number %d with a longish description", i)}
	}
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		ix := New(Config{})
		for _, d := range docs {
			ix.Upsert(d)
		}
		for _, d := range big {
			ix.Upsert(d)
		}
		b.StartTimer()
		t0 := time.Now()
		for _, d := range big {
			ix.Remove(d.ID)
		}
		took += time.Since(t0)
	}
	b.ReportMetric(took.Seconds()*1000/float64(b.N), "ms/server")
}

// BenchmarkParseQuery measures parsing the benchmark queries alone (each op parses one).
func BenchmarkParseQuery(b *testing.B) {
	queries := benchQueries(b)
	cfg := resolve(Config{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pq := cfg.parseQuery(queries[i%len(queries)])
		pq.release()
	}
}
