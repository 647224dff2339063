package indexer

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// The catalog's freshness view is asked only of the tools the catalog holds (their lists' state),
// never of one its server no longer lists (details answer "removed" from the catalog's own
// records, bounded by Config.MaxRemoved in all): it remembers no more removed tool names a
// server than staleness.MaxRememberedItems, as before the executor's view was given the
// catalog's bound (staleness.MaxRemembered, 50,000 a server: up to 200 MiB of names a server in
// every replica, for nothing).
func TestCatalogViewRemembersFewRemovedNames(t *testing.T) {
	d := openDirect(t, nil)
	d.apply(status("churn", subjects.StatusReady))
	const lists, per = 5, 1500 // 6,000 names removed: past MaxRememberedItems, below MaxRemembered
	name := func(l, i int) string { return fmt.Sprintf("t%d_%d", l, i) }
	for l := range lists {
		items := make([]json.RawMessage, per)
		for i := range items {
			items[i] = tool(name(l, i), "a tool")
		}
		d.apply(snapshot("churn", "churning server", items...))
	}
	remembered := 0
	for l := range lists - 1 {
		for i := range per {
			if d.view.Remembers("churn", subjects.KindTools, name(l, i)) {
				remembered++
			}
		}
	}
	if limit := staleness.MaxRememberedItems + per; remembered > limit {
		t.Errorf("the catalog's view remembers %d removed tool names of churn, want at most %d", remembered, limit)
	}
	// The tools listed are still fresh, and details of a removed one say so.
	if v := d.view.Tool("churn", name(lists-1, 0)); v.State != staleness.Fresh {
		t.Errorf("%s: %s, want fresh", name(lists-1, 0), v.State)
	}
	rep := d.Details(t.Context(), subjects.DetailsRequest{V: 1, Names: []string{"churn__" + name(lists-2, 0)}})
	if rep.Error == nil || rep.Error.Reason != subjects.StateRemoved {
		t.Errorf("details of a tool just removed: %+v, want not_found (removed)", rep.Error)
	}
}
