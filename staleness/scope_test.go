package staleness

import (
	"encoding/json"
	"strings"
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

// A tool removed from a list keeps the scope of the list it was in, not that of the list that
// left it out: a private list of tenant acme re-listed public without get_salary must not tell
// everyone that get_salary was there (the catalog's removed record keeps the old list's scope),
// and a public list re-listed private to acme without a tool still tells everyone it was removed.
func TestRemovedKeepsScopeOfItsList(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	v := New(func() time.Time { return t0 })
	v.Apply(status("payroll", subjects.StatusReady))
	listed := func(scope, authContext string, names ...string) {
		ev := snap("payroll", nil, t0, names...)
		ev.Snapshot.CacheScope, ev.Snapshot.AuthContext = scope, authContext
		v.Apply(ev)
	}
	check := func(step, tool string, want State, scope, authContext string) {
		t.Helper()
		got := v.Tool("payroll", tool)
		if got.State != want || got.CacheScope != scope || got.AuthContext != authContext {
			t.Errorf("%s: %s: got %s scope %q %q, want %s scope %q %q", step, tool, got.State, got.CacheScope, got.AuthContext, want, scope, authContext)
		}
	}
	listed(subjects.ScopePrivate, "tenant:acme", "get_salary", "list_staff")
	listed(subjects.ScopePublic, "", "list_staff")
	check("removed from acme's list", "get_salary", Removed, subjects.ScopePrivate, "tenant:acme")
	check("listed publicly", "list_staff", Fresh, subjects.ScopePublic, "")
	listed(subjects.ScopePublic, "", "list_staff", "org_chart")
	check("still removed, a list later", "get_salary", Removed, subjects.ScopePrivate, "tenant:acme")
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "payroll", Tools: []string{"get_salary"}}})
	check("removed, then revoked", "get_salary", Revoked, subjects.ScopePrivate, "tenant:acme")
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "payroll", Restore: []string{"get_salary"}}})

	listed(subjects.ScopePrivate, "tenant:acme", "list_staff")
	check("removed from a public list", "org_chart", Removed, subjects.ScopePublic, "")
	check("get_salary still acme's", "get_salary", Removed, subjects.ScopePrivate, "tenant:acme")
	v.Apply(status("payroll", subjects.StatusRemoved))
	check("server removed", "org_chart", Removed, subjects.ScopePublic, "")
	check("server removed, listed", "list_staff", Removed, subjects.ScopePrivate, "tenant:acme")
}

// What the catalog and the executor skip of a tools list (a definition over
// subjects.MaxDefinitionBytes, a name over MaxToolNameBytes) is not listed: a tool re-listed so is
// removed, with the scope of the list it was in, as the catalog's removed record says.
func TestSkippedItemsNotListed(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	v := New(func() time.Time { return t0 })
	v.Apply(status("payroll", subjects.StatusReady))
	long := strings.Repeat("n", subjects.MaxToolNameBytes+1)
	ev := snap("payroll", nil, t0, "get_salary", "list_staff", long)
	ev.Snapshot.CacheScope, ev.Snapshot.AuthContext = subjects.ScopePrivate, "tenant:acme"
	v.Apply(ev)
	if got := v.Tool("payroll", long); got.State != Unknown || v.Remembers("payroll", subjects.KindTools, long) {
		t.Errorf("a name over MaxToolNameBytes: %s (remembered: %v), want unknown", got.State, v.Remembers("payroll", subjects.KindTools, long))
	}
	ev = snap("payroll", nil, t0, "list_staff")
	ev.Snapshot.Items = append(ev.Snapshot.Items, json.RawMessage(`{"name":"get_salary","description":"`+strings.Repeat("x", subjects.MaxDefinitionBytes)+`"}`))
	v.Apply(ev)
	if got := v.Tool("payroll", "get_salary"); got.State != Removed || got.CacheScope != subjects.ScopePrivate || got.AuthContext != "tenant:acme" {
		t.Errorf("re-listed too large: %s scope %q %q, want removed from acme's list", got.State, got.CacheScope, got.AuthContext)
	}
	if got := v.Tool("payroll", "list_staff"); got.State != Fresh || got.CacheScope != "" {
		t.Errorf("list_staff: %s scope %q, want fresh, public", got.State, got.CacheScope)
	}
}
