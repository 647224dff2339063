package executor

import (
	"testing"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestSameUserNameInTwoTenants: "acme/admin" may call every tool, "beta/admin" getLogStats
// only. Over NATS, each call of admin is decided with the roles of the subject's tenant (as the
// catalog shows it: indexer's TestSameUserNameInTwoTenantsOverNATS), and neither the local
// subject nor a third tenant's takes the name.
func TestSameUserNameInTwoTenants(t *testing.T) {
	p, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"acme/admin": {Roles: []string{"all-tools"}},
			"beta/admin": {Roles: []string{"narrow"}},
		},
		Rules: []policy.Rule{
			{Name: "all", Roles: []string{"all-tools"}, Allow: []string{"*"}},
			{Name: "narrow", Roles: []string{"narrow"}, Allow: []string{"logging__getLogStats"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := startRig(t, rigOptions{servers: []string{"logging"}, exec: Config{Policy: p}})
	getLogs := `{"level":"error","since":0}`
	for _, tc := range []struct {
		name, tenant, tool, args string
		pr                       subjects.Principal
		status, code             string
	}{
		{"acme's admin, getLogs", "acme", "logging__getLogs", getLogs, subjects.Principal{User: "admin"}, subjects.CallOK, ""},
		{"acme's admin, getLogStats", "acme", "logging__getLogStats", `{}`, subjects.Principal{User: "admin"}, subjects.CallOK, ""},
		{"beta's admin, getLogStats", "beta", "logging__getLogStats", `{}`, subjects.Principal{User: "admin"}, subjects.CallOK, ""},
		{"beta's admin, getLogs", "beta", "logging__getLogs", getLogs, subjects.Principal{User: "admin"}, subjects.CallRefused, subjects.CodeForbidden},
		{"beta's admin with acme's role", "beta", "logging__getLogs", getLogs, subjects.Principal{User: "admin", Roles: []string{"all-tools"}}, subjects.CallRefused, subjects.CodeForbidden},
		{"acme's admin on beta's subject", "beta", "logging__getLogs", getLogs, subjects.Principal{Tenant: "acme", User: "admin"}, subjects.CallRefused, subjects.CodeBadRequest},
		{"admin on the local subject", "local", "logging__getLogStats", `{}`, subjects.Principal{User: "admin"}, subjects.CallRefused, subjects.CodeUnknownPrincipal},
		{"admin on a third tenant's subject", "gamma", "logging__getLogStats", `{}`, subjects.Principal{User: "admin"}, subjects.CallRefused, subjects.CodeUnknownPrincipal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.call(tc.tenant, tc.tool, tc.args, func(req *subjects.CallRequest) { req.Principal = tc.pr })
			if res.Status != tc.status || tc.code != "" && (res.Error == nil || res.Error.Code != tc.code) {
				t.Fatalf("got %s %+v, want %s %s", res.Status, res.Error, tc.status, tc.code)
			}
		})
	}
}
