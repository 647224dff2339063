package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestSkippedRelistIsRemoved: a definition the catalog and the executor skip (over
// subjects.MaxDefinitionBytes, or a name over MaxToolNameBytes) is not in the list: a tool of a
// list private to tenant acme, re-listed publicly with such a definition, is removed from
// acme's list as the catalog's removed record says, not a public tool. The freshness view
// counted every named item as listed: it called get_salary fresh in the public list, and the
// executor, which still held acme's definition, let tenant beta call it (the catalog: not_found)
// and told acme it could run (the catalog: removed). (A name over MaxToolNameBytes is no call's:
// staleness's TestSkippedItemsNotListed covers it.)
func TestSkippedRelistIsRemoved(t *testing.T) {
	now := time.Now()
	tool := xTool
	huge := json.RawMessage(`{"name":"get_salary","description":"` + strings.Repeat("x", subjects.MaxDefinitionBytes) + `","inputSchema":{"type":"object","required":["x"]}}`)
	longName := strings.Repeat("n", subjects.MaxToolNameBytes+1)
	list := func(server, fp, scope, authContext string, items ...json.RawMessage) diffEvent {
		return toolList(now, server, fp, scope, authContext, items...)
	}
	r, _, cl := startBoth(t, policy.Open(), []diffEvent{
		{subjects.RegistryStatus("payroll"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "payroll", Status: subjects.StatusReady, At: now}},
		list("payroll", "f1", subjects.ScopePrivate, "tenant:acme", tool("list_staff"), tool("get_salary"), tool(longName)),
		list("payroll", "f2", subjects.ScopePublic, "", tool("list_staff"), huge, tool(longName)),
	})
	checkAgree(t, r, cl, []agreeCase{
		{"beta", "payroll__get_salary", subjects.CodeNotFound, false},
		{"acme", "payroll__get_salary", subjects.CodeStale, true},
		{"beta", "payroll__list_staff", subjects.CodeInvalidArguments, false},
	})
}

// TestRemovedServerKeepsScope: registrysync removes a server with a removed status, then an
// empty snapshot of each kind (a retraction, public: it names no context). The tools of its
// private list keep that list's scope: told removed to its own context only, as in the catalog.
func TestRemovedServerKeepsScope(t *testing.T) {
	now := time.Now()
	st := func(status string) diffEvent {
		return diffEvent{subjects.RegistryStatus("payroll"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "payroll", Status: status, At: now}}
	}
	list := func(fp, scope, authContext string, items ...json.RawMessage) diffEvent {
		return toolList(now, "payroll", fp, scope, authContext, items...)
	}
	r, _, cl := startBoth(t, policy.Open(), []diffEvent{
		st(subjects.StatusReady),
		list("f1", subjects.ScopePrivate, "tenant:acme", xTool("get_salary")),
		st(subjects.StatusRemoved),
		list("f2", "", ""), // the retraction
	})
	checkAgree(t, r, cl, []agreeCase{
		{"acme", "payroll__get_salary", subjects.CodeStale, true},
		{"beta", "payroll__get_salary", subjects.CodeNotFound, false},
	})
}
