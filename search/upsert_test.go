package search

import (
	"strings"
	"testing"
)

// TestUpsertServerDescriptionOnce: every tool of a server carries the server's description, and
// a rebuild upserts every tool: the description is tokenized when it is new or changed, not
// once per tool (a replay of 100k tools paid for it 100k times). Measured in allocations, which
// tokenizing a long description makes many of: a tool of a server with a long description costs
// what one of a server with a short description does.
func TestUpsertServerDescriptionOnce(t *testing.T) {
	allocs := func(desc string) float64 {
		ix := New(Config{})
		ix.Upsert(Doc{ID: "s__a", Server: "s", Name: "a", Description: "Reads a file.", ServerDescription: desc})
		return testing.AllocsPerRun(50, func() {
			ix.Upsert(Doc{ID: "s__b", Server: "s", Name: "b", Description: "Writes a file.", ServerDescription: desc})
		})
	}
	short := allocs("Files on disk.")
	long := allocs(strings.Repeat("Files on disk, folders, permissions and quotas of the shared volume. ", 200))
	if long > short {
		t.Errorf("a tool of a server with a long description: %.0f allocations, one with a short description %.0f: the description is tokenized per tool", long, short)
	}
	// A changed description is indexed anew, and the old one's terms leave.
	ix := New(Config{})
	ix.Upsert(Doc{ID: "s__a", Server: "s", Name: "a", ServerDescription: "Weather forecasts"})
	ix.Upsert(Doc{ID: "s__b", Server: "s", Name: "b", ServerDescription: "Invoices and payments"})
	rec := ix.servers[ix.srvByName["s"]]
	if want := analyzeServer("Invoices and payments"); rec.desc != "Invoices and payments" || int(rec.length) != len(want) || ix.srvLenSum != int64(len(want)) {
		t.Errorf("server record %+v (lengths %d), want the new description's %d terms", rec, ix.srvLenSum, len(want))
	}
	for _, tok := range analyzeServer("Weather forecasts") {
		if id, ok := ix.dict[tok]; ok && len(ix.terms[id].srv) != 0 {
			t.Errorf("the old description's term %q is still indexed", tok)
		}
	}
}
