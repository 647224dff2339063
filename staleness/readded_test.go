package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestServerAddedAgainListsNothing: a server removed and then added again (its new status
// before its first list) lists nothing until its next snapshot, as the catalog, which drops a
// removed server's lists, says: its old list's tools are removed, in the scope of that list,
// not fresh (ready), unavailable (connecting) or stale (a list_changed) again. A confirmation
// of the old list lifts nothing; the next snapshot lists what it holds.
func TestServerAddedAgainListsNothing(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	v := New(func() time.Time { return t0 })
	old := snap("crm", nil, t0.Add(-time.Minute), "a", "b")
	old.Snapshot.CacheScope, old.Snapshot.AuthContext = subjects.ScopePrivate, "tenant:acme"
	v.Apply(status("crm", subjects.StatusReady))
	v.Apply(old)
	v.Apply(status("crm", subjects.StatusRemoved))
	check := func(step string) {
		t.Helper()
		for _, n := range []string{"a", "b"} {
			got := v.Tool("crm", n)
			if got.State != Removed || got.CacheScope != subjects.ScopePrivate || got.AuthContext != "tenant:acme" {
				t.Errorf("%s: %s is %s (%s) in scope %s/%s, want removed in private/tenant:acme", step, n, got.State, got.Reason, got.CacheScope, got.AuthContext)
			}
			if !v.Remembers("crm", subjects.KindTools, n) {
				t.Errorf("%s: %s is not remembered", step, n)
			}
		}
	}
	check("removed")
	for _, st := range []string{subjects.StatusConnecting, subjects.StatusReady} {
		v.Apply(status("crm", st))
		check("added again, " + st)
	}
	v.Apply(subjects.RegistryEvent{Seq: 9, ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: "crm", Kind: subjects.KindTools}})
	check("list_changed")
	v.Apply(subjects.RegistryEvent{Confirmed: &subjects.Confirmed{V: 1, Type: subjects.EventConfirmed, Server: "crm", Kind: subjects.KindTools,
		Fingerprint: old.Snapshot.Fingerprint, ListedAt: t0, AfterSeq: 9}})
	check("the old list confirmed")
	v.Apply(snap("crm", nil, t0, "b", "c"))
	for n, want := range map[string]State{"a": Removed, "b": Fresh, "c": Fresh, "d": Unknown} {
		if got := v.Tool("crm", n).State; got != want {
			t.Errorf("listed again: %s is %s, want %s", n, got, want)
		}
	}
}
