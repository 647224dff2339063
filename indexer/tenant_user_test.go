package indexer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestSameUserNameInTwoTenantsOverNATS: "acme/admin" may use every tool, "beta/admin" only the
// knowledge base. Each, searching on its own tenant's subject, sees what its own roles allow,
// whatever the other searched before (the search index caches per-principal statistics by
// visibleKey/policy.Class: one class for both would show beta's admin acme's tools, or hide
// them from acme's); details and counts agree; the other tenant's and the local subject refuse
// the bare name. A second policy tells the two apart by tenant alone (same role, a rule
// naming the tenant).
func TestSameUserNameInTwoTenantsOverNATS(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	queries := []string{"get logs error entries", "close a ticket", "knowledge base", "search"}
	for _, pc := range []struct {
		name string
		cfg  *policy.Config
	}{
		{"by role", &policy.Config{
			Principals: map[string]policy.PrincipalConfig{
				"acme/admin": {Roles: []string{"all-tools"}},
				"beta/admin": {Roles: []string{"narrow"}},
			},
			Rules: []policy.Rule{
				{Name: "all", Roles: []string{"all-tools"}, Allow: []string{"*"}},
				{Name: "narrow", Roles: []string{"narrow"}, Allow: []string{"kb__*"}},
			},
		}},
		{"by tenant", &policy.Config{
			Principals: map[string]policy.PrincipalConfig{
				"acme/admin": {Roles: []string{"admin"}},
				"admin":      {Tenant: "beta", Roles: []string{"admin"}},
			},
			Rules: []policy.Rule{
				{Name: "acme admins", Tenants: []string{"acme"}, Roles: []string{"admin"}, Allow: []string{"*"}},
				{Name: "admins", Users: []string{"admin"}, Allow: []string{"kb__*"}},
			},
		}},
	} {
		t.Run(pc.name, func(t *testing.T) {
			r := startReplica(t, env, "", mustPolicy(t, pc.cfg), env.Connect(t))
			waitSeq(t, r.Catalog, seq)
			// What each tenant's admin gets from a replica nobody else searched (in-process, as
			// the service passes it on once the subject pinned its tenant).
			want := map[string]map[string][]subjects.ToolInfo{}
			for _, tenant := range []string{"acme", "beta"} {
				ref := startReplica(t, env, "", mustPolicy(t, pc.cfg), nil)
				waitSeq(t, ref.Catalog, seq)
				want[tenant] = map[string][]subjects.ToolInfo{}
				for _, q := range queries {
					rep := find(t, ref.Catalog, q, as(subjects.Principal{Tenant: tenant, User: "admin"}), func(r *subjects.SearchRequest) { r.K = 100 })
					mustNoErr(t, rep.Error)
					want[tenant][q] = rep.Tools
				}
			}
			cl := Client{NC: env.Connect(t)}
			ctx := context.Background()
			admin := subjects.Principal{User: "admin"}
			waitFor(t, "service up", func() bool {
				_, err := cl.Servers(ctx, "acme", subjects.ServersRequest{V: 1, Principal: admin})
				return err == nil
			})
			search := func(tenant, q string) subjects.SearchReply {
				t.Helper()
				rep, err := cl.Search(ctx, tenant, subjects.SearchRequest{V: 1, Query: q, K: 100, Principal: admin})
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			// Alternate the tenants, each first in turn, so that a shared cache entry shows.
			for round := range 2 {
				for i, q := range queries {
					order := []string{"beta", "acme"}
					if (round+i)%2 == 1 {
						order = []string{"acme", "beta"}
					}
					for _, tenant := range order {
						rep := search(tenant, q)
						mustNoErr(t, rep.Error)
						if !sameHits(rep.Tools, want[tenant][q]) {
							t.Errorf("%s's admin, %q (round %d, after %v): got %v, want %v as alone", tenant, q, round, order, hits(rep.Tools), hits(want[tenant][q]))
						}
						for _, n := range names(rep.Tools) {
							if tenant == "beta" && !strings.HasPrefix(n, "kb__") {
								t.Errorf("beta's admin, %q: sees %s (acme's admin's)", q, n)
							}
						}
						if tenant == "acme" && q == "get logs error entries" && !slices.ContainsFunc(names(rep.Tools), func(n string) bool { return strings.HasPrefix(n, "logging__") }) {
							t.Errorf("acme's admin, %q: %v, want the logging tools", q, names(rep.Tools))
						}
					}
				}
			}
			sel := "select:logging__getLogs,kb__search_knowledge_base"
			if got := names(search("acme", sel).Tools); len(got) != 2 {
				t.Errorf("acme's admin selects %v, want both", got)
			}
			if got := names(search("beta", sel).Tools); !slices.Equal(got, []string{"kb__search_knowledge_base"}) {
				t.Errorf("beta's admin selects %v, want the kb tool only", got)
			}
			det, err := cl.Details(ctx, "beta", subjects.DetailsRequest{V: 1, Names: []string{"logging__getLogs"}, Principal: admin})
			if err != nil || det.Error == nil || det.Error.Code != subjects.CodeNotFound {
				t.Errorf("details of logging__getLogs for beta's admin: %+v, %v; want not_found", det.Error, err)
			}
			det, err = cl.Details(ctx, "acme", subjects.DetailsRequest{V: 1, Names: []string{"logging__getLogs"}, Principal: admin})
			if err != nil || det.Error != nil || len(det.Tools) != 1 {
				t.Errorf("details of logging__getLogs for acme's admin: %+v, %v", det.Error, err)
			}
			for tenant, wantLogging := range map[string]bool{"acme": true, "beta": false} {
				srv, err := cl.Servers(ctx, tenant, subjects.ServersRequest{V: 1, Principal: admin})
				if err != nil || srv.Error != nil {
					t.Fatalf("servers on %s: %+v, %v", tenant, srv.Error, err)
				}
				if got := slices.ContainsFunc(srv.Servers, func(s subjects.ServerSummary) bool { return s.Name == "logging" }); got != wantLogging {
					t.Errorf("servers of %s's admin: logging listed %v, want %v", tenant, got, wantLogging)
				}
			}
			// Neither the local subject nor a third tenant's take the name of two tenants' users.
			for _, tenant := range []string{policy.Local.Tenant, "gamma"} {
				if rep := search(tenant, "knowledge base"); rep.Error == nil || rep.Error.Code != subjects.CodeUnknownPrincipal || len(rep.Tools) != 0 {
					t.Errorf("admin on %s: %+v, %d tools; want unknown_principal", tenant, rep.Error, len(rep.Tools))
				}
			}
		})
	}
}

func sameHits(a, b []subjects.ToolInfo) bool {
	return slices.EqualFunc(a, b, func(x, y subjects.ToolInfo) bool { return x.Name == y.Name && x.Score == y.Score })
}

func hits(ts []subjects.ToolInfo) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s:%.4g", t.Name, t.Score))
	}
	return out
}
