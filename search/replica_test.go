package search

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestReplicasAgree builds the same final catalog in indexes that got there through different
// histories (another order of upserts, tools replaced and removed along the way, servers that
// left and came back, with and without a compaction) and checks that every query returns
// exactly the same hits (IDs, order and scores) in all of them, with and without filters and
// visibility classes: replicas of the indexer must answer alike. The catalog is replicated so
// that many tools tie exactly (the same text on several servers).
func TestReplicasAgree(t *testing.T) {
	docs := replicatedDocs(t, 1600)
	queries := append(benchQueries(t),
		"搜索", "获取新闻", "新闻 search", "电子表格", "create_issue", "the of and", "zzqx", "read file /root/notes.md",
		"save the summary to ./out/report.md and then send an email", "search web and get news headlines")

	visible := func(id string) bool { return len(id)%5 != 2 }
	build := func(seed int64, churn bool) *Index {
		ix := New(Config{})
		order := slices.Clone(docs)
		if seed != 0 {
			rand.New(rand.NewSource(seed)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		rng := rand.New(rand.NewSource(seed + 100))
		for i, d := range order {
			if churn {
				switch rng.Intn(6) {
				case 0: // an earlier version of the tool first
					old := d
					old.Description = fmt.Sprintf("Old version %d of a tool that wrote news to files.", i)
					old.Params = nil
					ix.Upsert(old)
				case 1: // a tool that comes and goes, on the same server
					ix.Upsert(Doc{ID: d.Server + "__tmp", Server: d.Server, ServerDescription: d.ServerDescription,
						Name: "tmp", Description: "A temporary tool to search news and write files."})
					defer ix.Remove(d.Server + "__tmp")
				case 2: // a whole other server that leaves
					id := fmt.Sprintf("gone%d__tool", i)
					ix.Upsert(Doc{ID: id, Server: fmt.Sprintf("gone%d", i), ServerDescription: "Issues and news.",
						Name: "tool", Description: "Create issues, fetch news."})
					defer ix.Remove(id)
				}
			}
			ix.Upsert(d)
			if churn && i%97 == 0 {
				// Statistics of a visibility class kept from generation to generation.
				ix.Search(Query{Text: "search news", Visible: visible, VisibleKey: "v"})
			}
		}
		return ix
	}
	ref := build(0, false)
	replicas := map[string]*Index{
		"shuffled":         build(1, false),
		"shuffled, churn":  build(2, true),
		"reversed, churn":  build(3, true),
		"compacted, churn": build(4, true),
	}
	ix := replicas["compacted, churn"]
	ix.mu.Lock()
	ix.compact()
	ix.mu.Unlock()
	if len(replicas["shuffled, churn"].docs) == replicas["shuffled, churn"].Len() {
		t.Fatal("no removed slot pending: the test does not exercise lazy removal")
	}

	allow := func(id string) bool { return len(id)%4 != 1 }
	for _, q := range queries {
		for _, qu := range []Query{
			{Text: q, K: 200},
			{Text: q, K: 7},
			{Text: q, K: 30, Allow: allow},
			{Text: q, K: 30, Visible: visible, VisibleKey: "v"},
		} {
			want := ref.Search(qu)
			for name, ix := range replicas {
				if got := ix.Search(qu); !slices.Equal(got, want) {
					t.Errorf("%s: %q (K %d, filtered %v, visible %v):\n got  %v\n want %v",
						name, q, qu.K, qu.Allow != nil, qu.Visible != nil, got, want)
				}
			}
		}
	}
}
