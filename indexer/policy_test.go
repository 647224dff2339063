package indexer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

func mustPolicy(t testing.TB, cfg *policy.Config) *policy.Policy {
	t.Helper()
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// TestPermissionFiltering: a tool the principal may not call never appears in search (not even
// as one of the k places), select, details or counts.
func TestPermissionFiltering(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"support"}},
			"bob":   {Tenant: "acme", Roles: []string{"ops"}},
		},
		Rules: []policy.Rule{
			{Name: "support", Roles: []string{"support"}, Allow: []string{"kb__*", "ticketing__*"}, Deny: []string{"ticketing__closeIssue"}},
			{Name: "ops", Roles: []string{"ops"}, Allow: []string{"*"}, Approve: []string{"logging__getLogs"}},
		},
	})
	r := startReplica(t, env, "", pol, nil)
	waitSeq(t, r.Catalog, seq)
	alice := subjects.Principal{User: "alice"}
	bob := subjects.Principal{User: "bob"}
	ctx := context.Background()

	denied := []string{"ticketing__closeIssue", "logging__getLogs", "logging__getLogStats", "bing-cn__bing_search"}
	queries := []string{
		"close a ticket", "closeIssue", "ticketing__closeIssue", "get logs error entries", "log statistics",
		"必应搜索", "ticket", "issue tracker tickets", "knowledge base",
	}
	for _, q := range queries {
		for _, k := range []int{1, 3, 100} {
			rep := find(t, r.Catalog, q, as(alice), func(r *subjects.SearchRequest) { r.K = k; r.IncludeUnavailable = true })
			mustNoErr(t, rep.Error)
			for _, n := range names(rep.Tools) {
				if slices.Contains(denied, n) {
					t.Errorf("alice, %q k=%d: denied %s returned", q, k, n)
				}
			}
		}
	}
	// The denied tool does not take the one place of k=1: the best allowed tool does.
	if got := names(find(t, r.Catalog, "close a ticket", as(alice), func(r *subjects.SearchRequest) { r.K = 1 }).Tools); len(got) != 1 || !strings.HasPrefix(got[0], "ticketing__") {
		t.Errorf("alice k=1 got %v, want one allowed ticketing tool", got)
	}
	if got := names(find(t, r.Catalog, "select:"+strings.Join(denied, ","), as(alice)).Tools); len(got) != 0 {
		t.Errorf("select of denied tools returned %v", got)
	}
	// Details of a denied tool look exactly like those of a tool that does not exist.
	den := r.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"ticketing__closeIssue"}, Principal: alice})
	none := r.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"ticketing__noSuchTool"}, Principal: alice})
	if den.Error == nil || den.Error.Code != subjects.CodeNotFound || den.Error.Reason != "" || len(den.Tools) != 0 {
		t.Errorf("details of a denied tool: %+v %+v", den.Tools, den.Error)
	}
	if strings.ReplaceAll(den.Error.Message, "closeIssue", "X") != strings.ReplaceAll(none.Error.Message, "noSuchTool", "X") {
		t.Errorf("denied and missing differ: %q vs %q", den.Error.Message, none.Error.Message)
	}
	// Counts: alice sees 2 ticketing tools, no logging server.
	srv := map[string]subjects.ServerSummary{}
	for _, s := range r.Servers(ctx, subjects.ServersRequest{V: 1, Principal: alice}).Servers {
		srv[s.Name] = s
	}
	if srv["ticketing"].Tools != 2 || srv["kb"].Tools != 2 {
		t.Errorf("alice's counts: %+v", srv)
	}
	if _, ok := srv["logging"]; ok {
		t.Errorf("alice sees the logging server, none of whose tools she may call")
	}
	// bob may use everything; getLogs needs approval.
	rep := find(t, r.Catalog, "select:logging__getLogs,ticketing__closeIssue", as(bob))
	if got := names(rep.Tools); len(got) != 2 {
		t.Fatalf("bob: %v", got)
	}
	if !slices.Contains(rep.Tools[0].Labels, LabelNeedsApproval) || !slices.Contains(rep.Tools[1].Labels, LabelNeedsApproval) {
		t.Errorf("needs-approval labels missing: %v / %v", rep.Tools[0].Labels, rep.Tools[1].Labels)
	}
	// Unknown principals are refused with a stable code.
	for _, pr := range []subjects.Principal{{User: "mallory"}, {}, {User: "alice", Tenant: "other"}} {
		if e := find(t, r.Catalog, "ticket", as(pr)).Error; e == nil || e.Code != subjects.CodeUnknownPrincipal {
			t.Errorf("principal %+v: %+v", pr, e)
		}
		if e := r.Servers(ctx, subjects.ServersRequest{Principal: pr}).Error; e == nil || e.Code != subjects.CodeUnknownPrincipal {
			t.Errorf("servers for %+v: %+v", pr, e)
		}
	}
}

// TestOpenPolicy: without a policy one local principal may use everything.
func TestOpenPolicy(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	rep := find(t, r.Catalog, "select:ticketing__closeIssue,logging__getLogs")
	if got := names(rep.Tools); len(got) != 2 {
		t.Fatalf("open policy: %v %+v", got, rep.Error)
	}
}

// TestPrivateScope: a list the server marked cacheScope private is visible only to its
// authorization context.
func TestPrivateScope(t *testing.T) {
	env := natstest.Start(t)
	priv := snapshot("payroll", "Payroll of acme", tool("get_salary", "Read the salary of an employee"))
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "tenant:acme/user:carol"
	host := snapshot("hostcal", "Host calendar", tool("list_meetings", "List the meetings of the host"))
	host.CacheScope = subjects.ScopePrivate // the host's own credentials
	evs := append(demoEvents(t), status("payroll", subjects.StatusReady), priv, status("hostcal", subjects.StatusReady), host)
	seq := publish(t, env.JS, evs...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	ctx := context.Background()

	tests := []struct {
		pr               subjects.Principal
		salary, meetings bool
	}{
		{subjects.Principal{Tenant: "acme", User: "carol"}, true, false},
		{subjects.Principal{Tenant: "acme", User: "dave"}, false, false},
		{subjects.Principal{Tenant: "other", User: "carol"}, false, false},
		{subjects.Principal{}, false, true}, // the local principal
	}
	for _, tt := range tests {
		t.Run(tt.pr.Tenant+"/"+tt.pr.User, func(t *testing.T) {
			got := names(find(t, r.Catalog, "salary of an employee meetings of the host", as(tt.pr)).Tools)
			if slices.Contains(got, "payroll__get_salary") != tt.salary || slices.Contains(got, "hostcal__list_meetings") != tt.meetings {
				t.Errorf("search: %v", got)
			}
			det := r.Details(ctx, subjects.DetailsRequest{V: 1, Names: []string{"payroll__get_salary"}, Principal: tt.pr})
			if (det.Error == nil) != tt.salary {
				t.Errorf("details: %+v", det.Error)
			}
			// Outside carol's context the server is not listed at all: its only list, its
			// description and its use are hers.
			count := -1
			for _, s := range r.Servers(ctx, subjects.ServersRequest{Principal: tt.pr}).Servers {
				if s.Name == "payroll" {
					count = s.Tools
					if !tt.salary {
						t.Errorf("listed outside its authorization context: %+v", s)
					}
				}
			}
			if want := map[bool]int{true: 1, false: -1}[tt.salary]; count != want {
				t.Errorf("payroll counts %d tools, want %d (-1: not listed)", count, want)
			}
		})
	}
}
