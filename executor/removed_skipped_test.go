package executor

import (
	"context"
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
	tool := func(n string) json.RawMessage {
		return json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object","required":["x"]}}`)
	}
	huge := json.RawMessage(`{"name":"get_salary","description":"` + strings.Repeat("x", subjects.MaxDefinitionBytes) + `","inputSchema":{"type":"object","required":["x"]}}`)
	longName := strings.Repeat("n", subjects.MaxToolNameBytes+1)
	list := func(server, fp, scope, authContext string, items ...json.RawMessage) diffEvent {
		sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools, Fingerprint: fp, ListedAt: now, Pages: 1,
			CacheScope: scope, AuthContext: authContext, Items: append([]json.RawMessage{}, items...)}
		return diffEvent{subjects.RegistrySnapshot(server, subjects.KindTools), sn}
	}
	r, _, cl := startBoth(t, policy.Open(), []diffEvent{
		{subjects.RegistryStatus("payroll"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "payroll", Status: subjects.StatusReady, At: now}},
		list("payroll", "f1", subjects.ScopePrivate, "tenant:acme", tool("list_staff"), tool("get_salary"), tool(longName)),
		list("payroll", "f2", subjects.ScopePublic, "", tool("list_staff"), huge, tool(longName)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, c := range []struct {
		tenant, tool string
		want         string // the executor's code
		removed      bool   // the catalog's details say removed
	}{
		{"beta", "payroll__get_salary", subjects.CodeNotFound, false},
		{"acme", "payroll__get_salary", subjects.CodeStale, true},
		{"beta", "payroll__list_staff", subjects.CodeInvalidArguments, false},
	} {
		pr := subjects.Principal{User: "u"}
		res := r.call(c.tenant, c.tool, `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
		if res.Error == nil || res.Error.Code != c.want {
			t.Errorf("%s calls %.40s: got %s %+v, want %s", c.tenant, c.tool, res.Status, res.Error, c.want)
		}
		det, err := cl.Details(ctx, c.tenant, subjects.DetailsRequest{V: 1, Names: []string{c.tool}, Principal: pr})
		if err != nil {
			t.Fatal(err)
		}
		if c.want == subjects.CodeInvalidArguments {
			if det.Error != nil {
				t.Errorf("%s: details %s: %+v, want it shown", c.tenant, c.tool, det.Error)
			}
			continue
		}
		if det.Error == nil || det.Error.Code != subjects.CodeNotFound || (det.Error.Reason == subjects.StateRemoved) != c.removed {
			t.Errorf("%s: details %s: %+v, want not_found, removed: %v", c.tenant, c.tool, det.Error, c.removed)
		}
	}
}

// TestRemovedServerKeepsScope: registrysync removes a server with a removed status, then an
// empty snapshot of each kind (a retraction, public: it names no context). The tools of its
// private list keep that list's scope: told removed to its own context only, as in the catalog.
func TestRemovedServerKeepsScope(t *testing.T) {
	now := time.Now()
	st := func(status string) diffEvent {
		return diffEvent{subjects.RegistryStatus("payroll"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "payroll", Status: status, At: now}}
	}
	list := func(fp, scope, authContext string, names ...string) diffEvent {
		sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "payroll", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: now, Pages: 1,
			CacheScope: scope, AuthContext: authContext, Items: []json.RawMessage{}}
		for _, n := range names {
			sn.Items = append(sn.Items, json.RawMessage(`{"name":"`+n+`","inputSchema":{"type":"object","required":["x"]}}`))
		}
		return diffEvent{subjects.RegistrySnapshot("payroll", subjects.KindTools), sn}
	}
	r, _, cl := startBoth(t, policy.Open(), []diffEvent{
		st(subjects.StatusReady),
		list("f1", subjects.ScopePrivate, "tenant:acme", "get_salary"),
		st(subjects.StatusRemoved),
		list("f2", "", ""), // the retraction
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for tenant, want := range map[string]string{"acme": subjects.CodeStale, "beta": subjects.CodeNotFound} {
		pr := subjects.Principal{User: "u"}
		res := r.call(tenant, "payroll__get_salary", `{}`, func(req *subjects.CallRequest) { req.Principal = pr })
		if res.Error == nil || res.Error.Code != want {
			t.Errorf("%s: got %s %+v, want %s", tenant, res.Status, res.Error, want)
		}
		det, err := cl.Details(ctx, tenant, subjects.DetailsRequest{V: 1, Names: []string{"payroll__get_salary"}, Principal: pr})
		if err != nil {
			t.Fatal(err)
		}
		if det.Error == nil || (det.Error.Reason == subjects.StateRemoved) != (tenant == "acme") {
			t.Errorf("%s: details %+v, want removed only for acme", tenant, det.Error)
		}
	}
}
