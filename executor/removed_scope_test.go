package executor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRemovedFromPrivateListNotTold: a tool removed from a list keeps the scope of the list it
// was in. The executor read a removed tool's scope from the server's current list instead: a
// list private to tenant acme re-listed public without get_salary made a call of it answer
// "stale: get_salary is no longer listed by payroll" to every tenant, telling them that acme's
// list held it, where the catalog (whose removed record keeps the old list's scope) says it
// does not exist; and a public list re-listed private to acme without directory made the
// executor answer not_found to the others where the catalog says it was removed.
func TestRemovedFromPrivateListNotTold(t *testing.T) {
	now := time.Now()
	list := func(server, fp, scope, authContext string, names ...string) diffEvent {
		var items []json.RawMessage
		for _, n := range names {
			items = append(items, xTool(n))
		}
		return toolList(now, server, fp, scope, authContext, items...)
	}
	r, _, cl := startBoth(t, policy.Open(), []diffEvent{
		{subjects.RegistryStatus("payroll"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "payroll", Status: subjects.StatusReady, At: now}},
		list("payroll", "f1", subjects.ScopePublic, "", "list_staff", "org_chart"),
		list("payroll", "f2", subjects.ScopePrivate, "tenant:acme", "list_staff", "get_salary"), // org_chart removed from a public list
		list("payroll", "f3", subjects.ScopePublic, "", "list_staff"),                           // get_salary removed from acme's
		{subjects.RegistryStatus("hr"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "hr", Status: subjects.StatusReady, At: now}},
		list("hr", "h1", subjects.ScopePublic, "", "holidays", "directory"),
		list("hr", "h2", subjects.ScopePrivate, "tenant:acme", "holidays"), // directory removed from a public list
	})
	checkAgree(t, r, cl, []agreeCase{
		{"beta", "payroll__get_salary", subjects.CodeNotFound, false},
		{"acme", "payroll__get_salary", subjects.CodeStale, true},
		{"beta", "payroll__org_chart", subjects.CodeStale, true},
		{"acme", "payroll__org_chart", subjects.CodeStale, true},
		{"beta", "hr__directory", subjects.CodeStale, true},
		{"acme", "hr__directory", subjects.CodeStale, true},
		{"beta", "hr__holidays", subjects.CodeNotFound, false},
	})
}
