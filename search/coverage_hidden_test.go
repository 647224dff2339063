package search

import (
	"fmt"
	"testing"
)

// TestServerCoverageHiddenVersusFiltered: server coverage counts a tool that the request's own
// filter rejects (Allow) among the tools the searcher may see, and never one it may not see
// (Visible), nor a removed one: the visible tools score as in an index without the hidden or
// removed tool, and as without the filter.
func TestServerCoverageHiddenVersusFiltered(t *testing.T) {
	docs := []Doc{
		{ID: "weather__get_forecast", Server: "weather", ServerDescription: "Weather service", Name: "get_forecast", Description: "Get the weather forecast for a city"},
		{ID: "weather__save_alert", Server: "weather", ServerDescription: "Weather service", Name: "save_alert", Description: "Save an alert about severe storms"},
		{ID: "storms__track_storm", Server: "storms", ServerDescription: "Storm service", Name: "track_storm", Description: "Track storms and their forecast"},
	}
	for i := range 8 {
		docs = append(docs, Doc{ID: fmt.Sprintf("f%d__thing", i), Server: fmt.Sprintf("f%d", i), Name: "thing", Description: "another thing"})
	}
	const hidden, q = "weather__save_alert", "forecast of storms, and an alert"
	full, without := New(Config{}), New(Config{})
	for _, d := range docs {
		full.Upsert(d)
		if d.ID != hidden {
			without.Upsert(d)
		}
	}
	visible := func(id string) bool { return id != hidden }
	keep := func(id string) bool { return id != hidden }
	// Hidden: as in the index without it, whatever the request's filter.
	want := fmt.Sprint(without.Search(Query{Text: q, K: 10}))
	for _, allow := range []func(string) bool{visible, func(id string) bool { return visible(id) && id != "storms__track_storm" }} {
		got := full.Search(Query{Text: q, K: 10, Allow: allow, Visible: visible, VisibleKey: "no-alert"})
		if allow(docs[2].ID) && fmt.Sprint(got) != want {
			t.Errorf("hidden: %v\n want %v (the index without it)", got, want)
		}
		if w := fmt.Sprint(without.Search(Query{Text: q, K: 10, Allow: allow})); fmt.Sprint(got) != w {
			t.Errorf("hidden, filtered: %v\n want %v (the index without it)", got, w)
		}
	}
	// Removed: as in the index without it.
	removed := New(Config{})
	for _, d := range docs {
		removed.Upsert(d)
	}
	removed.Remove(hidden)
	if got := fmt.Sprint(removed.Search(Query{Text: q, K: 10, Allow: keep})); got != want {
		t.Errorf("removed: %v\n want %v", got, want)
	}
	// Filtered but visible: the scores of the unfiltered search.
	var wantF []Hit
	for _, h := range full.Search(Query{Text: q, K: 10}) {
		if keep(h.ID) {
			wantF = append(wantF, h)
		}
	}
	if got := full.Search(Query{Text: q, K: 10, Allow: keep}); fmt.Sprint(got) != fmt.Sprint(wantF) {
		t.Errorf("filtered: %v\n want %v (unfiltered, its scores)", got, wantF)
	}
	if fmt.Sprint(wantF) == want {
		t.Fatalf("the alert does not change the forecast's score: the test shows nothing")
	}
}
