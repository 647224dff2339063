package search

import (
	"fmt"
	"testing"
)

// TestKPrefix: the best k tools of a search are the first k of the best k+n, whatever k (up to
// the indexer's 100): asking for more results adds results after, it does not reorder those
// already given. The head of the ranking that coverage and proximity rerank (and where a file
// operation looks for its tool) is the same for every k; before, a k above the rerank depth
// (50) reranked more candidates, which could move ahead of the first ones (on the real catalog,
// 68 of these 250 searches were not the prefix of k=100, one of them at k=1 and one at k=10),
// and a file operation could take a tool from deeper in the list.
func TestKPrefix(t *testing.T) {
	tools, queries := loadEval(t)
	ix := New(Config{})
	for _, d := range catalogDocs(tools, "") {
		ix.Upsert(d)
	}
	bad := 0
	perK := map[int]int{}
	for _, q := range queries {
		all := ix.Search(Query{Text: q.Query, K: 100})
		for _, k := range []int{1, 10, 50, 51, 60} {
			got := ix.Search(Query{Text: q.Query, K: k})
			want := all[:min(k, len(all))]
			if fmt.Sprint(got) != fmt.Sprint(want) {
				perK[k]++
				if bad++; bad <= 3 {
					t.Errorf("%q k=%d:\n got  %v\n want %v", q.Query, k, got, want)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d searches are not the prefix of k=100 (by k: %v)", bad, perK)
	}
}

// TestExactMentionsOutsideTheHead: a query naming tools exactly that are not among the reranked
// candidates (here 20 servers' get_item, whose words are in every tool: no candidate clears the
// floor) puts them first, at every k. Before, counting them into the head sliced the ranking past
// its end: a panic once past its capacity (a fresh index's first search), else stale memory.
func TestExactMentionsOutsideTheHead(t *testing.T) {
	ix := New(Config{})
	for i := range 20 {
		ix.Upsert(Doc{ID: fmt.Sprintf("s%02d__get_item", i), Server: fmt.Sprintf("s%02d", i), Name: "get_item", Description: "Get an item"})
	}
	for _, q := range []string{"get_item", "get_item and write it to /tmp/item.txt"} {
		all := ix.Search(Query{Text: q, K: 100})
		if len(all) != 20 || all[0].ID != "s00__get_item" {
			t.Fatalf("%q: %v, want the 20 get_item first", q, all)
		}
		for k := 1; k <= 25; k++ {
			if got, want := ix.Search(Query{Text: q, K: k}), all[:min(k, len(all))]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%q k=%d:\n got  %v\n want %v", q, k, got, want)
			}
		}
	}
}
