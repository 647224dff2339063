package search

import (
	"math"
	"slices"
	"testing"
)

// TestVisibleStatisticsAsIfAlone: a search with Query.Visible ranks and scores exactly as the
// same search over an index that holds only the visible tools, so tools the searcher may not
// see weigh on nothing it is shown (scores, the floor, which query words count).
func TestVisibleStatisticsAsIfAlone(t *testing.T) {
	tools, _ := loadEval(t)
	docs := catalogDocs(tools, "")
	var servers []string
	for _, d := range docs {
		if !slices.Contains(servers, d.Server) {
			servers = append(servers, d.Server)
		}
	}
	slices.Sort(servers)
	visibleServer := map[string]bool{}
	for i, s := range servers {
		visibleServer[s] = i%3 != 0 // two servers in three
	}
	all, alone := New(Config{}), New(Config{})
	visibleID := map[string]bool{}
	for _, d := range docs {
		all.Upsert(d)
		if visibleServer[d.Server] {
			alone.Upsert(d)
			visibleID[d.ID] = true
		}
	}
	visible := func(id string) bool { return visibleID[id] }
	for _, q := range benchQueries(t) {
		want := alone.Search(Query{Text: q, K: 10})
		got := all.Search(Query{Text: q, K: 10, Allow: visible, Visible: visible, VisibleKey: "two-in-three"})
		if len(got) != len(want) {
			t.Errorf("%q: %d hits, want %d (as if alone): %v vs %v", q, len(got), len(want), got, want)
			continue
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-9*math.Abs(want[i].Score) {
				t.Errorf("%q: hit %d is %v, want %v (as if alone)", q, i, got[i], want[i])
				break
			}
		}
	}
	// Without Visible the hidden tools count, as in any shared index.
	differ := 0
	for _, q := range benchQueries(t) {
		a, b := alone.Search(Query{Text: q, K: 10}), all.Search(Query{Text: q, K: 10, Allow: visible})
		if len(a) > 0 && len(b) > 0 && a[0].Score != b[0].Score {
			differ++
		}
	}
	if differ == 0 {
		t.Error("the catalog-wide statistics never changed a score: the test shows nothing")
	}
}
