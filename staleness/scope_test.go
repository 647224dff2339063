package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A revoked or removed tool keeps the cache scope of its list: a check of who may see the list
// (the executor's, before it tells a tool's state) must not read a private list as public.
func TestVerdictKeepsScope(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	v := New(func() time.Time { return t0 })
	ev := snap("payroll", nil, t0, "get_salary", "list_staff")
	ev.Snapshot.CacheScope, ev.Snapshot.AuthContext = subjects.ScopePrivate, "tenant:acme"
	v.Apply(status("payroll", subjects.StatusReady))
	v.Apply(ev)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "payroll", Tools: []string{"get_salary"}}})
	check := func(step, tool string, want State) {
		t.Helper()
		got := v.Tool("payroll", tool)
		if got.State != want || got.CacheScope != subjects.ScopePrivate || got.AuthContext != "tenant:acme" {
			t.Errorf("%s: got %s scope %q %q, want %s scope private tenant:acme", step, got.State, got.CacheScope, got.AuthContext, want)
		}
	}
	check("revoked", "get_salary", Revoked)
	check("listed", "list_staff", Fresh)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "payroll", Tools: []string{"*"}}})
	check("every tool revoked", "list_staff", Revoked)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "payroll", Restore: []string{"*"}}})
	v.Apply(status("payroll", subjects.StatusRemoved))
	check("server removed", "list_staff", Removed)
}
