package staleness

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestServerRemovedLargeListRemembered: a server whose tools list holds MaxRemembered names or
// more is removed (registrysync then retracts the list with an empty snapshot, `servers remove`),
// its status repeated: its names stay removed, as with a smaller list and as the catalog's
// removed records say, until a later list. The removal moved the whole list into the names
// remembered beyond it, so the retraction (or a repeated removal) found them past the bound and
// forgot them all: unknown, and the executor dropped their entries (not_found).
func TestServerRemovedLargeListRemembered(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	names := make([]string, MaxRemembered+10)
	for i := range names {
		names[i] = fmt.Sprintf("t%05d", i)
	}
	for _, retract := range []bool{false, true} {
		t.Run(fmt.Sprint("retracted=", retract), func(t *testing.T) {
			v := New(func() time.Time { return t0 })
			v.Apply(status("big", subjects.StatusReady))
			v.Apply(snap("big", nil, t0, names...))
			v.Apply(status("big", subjects.StatusRemoved))
			if retract {
				v.Apply(snap("big", nil, t0))
			}
			v.Apply(status("big", subjects.StatusRemoved)) // repeated: changes nothing
			v.Apply(status("big", subjects.StatusReady))
			for _, n := range []string{names[0], names[len(names)-1]} {
				if got := v.Tool("big", n); got.State != Removed || !v.Remembers("big", subjects.KindTools, n) {
					t.Errorf("%s is %s (%s), remembered %v; want removed", n, got.State, got.Reason, v.Remembers("big", subjects.KindTools, n))
				}
			}
			// Still bounded: the next list forgets what is past the bound.
			v.Apply(snap("big", nil, t0, "new"))
			v.Apply(snap("big", nil, t0, "newer"))
			if v.Remembers("big", subjects.KindTools, names[0]) {
				t.Errorf("%s still remembered after two more lists", names[0])
			}
		})
	}
}
