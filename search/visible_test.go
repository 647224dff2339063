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
	check := func(when string) {
		t.Helper()
		for _, q := range benchQueries(t) {
			want := alone.Search(Query{Text: q, K: 10})
			got := all.Search(Query{Text: q, K: 10, Allow: visible, Visible: visible, VisibleKey: "two-in-three"})
			if len(got) != len(want) {
				t.Errorf("%s: %q: %d hits, want %d (as if alone): %v vs %v", when, q, len(got), len(want), got, want)
				continue
			}
			for i := range got {
				if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-9*math.Abs(want[i].Score) {
					t.Errorf("%s: %q: hit %d is %v, want %v (as if alone)", when, q, i, got[i], want[i])
					break
				}
			}
		}
	}
	check("at first")

	// Writes between searches: the statistics follow them (from the previous generation's,
	// asking only about the tools written since), through a compaction too.
	both := func(d Doc) {
		all.Upsert(d)
		if visibleServer[d.Server] {
			alone.Upsert(d)
			visibleID[d.ID] = true
		}
	}
	for i, d := range docs {
		switch i % 7 {
		case 0: // removed
			all.Remove(d.ID)
			alone.Remove(d.ID)
			delete(visibleID, d.ID)
		case 1: // changed
			d.Description += " payroll ledger"
			both(d)
		case 2: // a new tool
			d.ID, d.Name = d.ID+"_v2", d.Name+"_v2"
			both(d)
		}
	}
	check("after writes")
	for range 3 { // over 1024 dead slots: a compaction renumbers them
		for _, d := range docs {
			if i, ok := all.byID[d.ID]; ok && !all.hot[i].dead {
				both(d)
			}
		}
	}
	if all.compactions == 0 {
		t.Fatal("no compaction: the test misses that path")
	}
	check("after a compaction")
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
