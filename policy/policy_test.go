package policy

import (
	"errors"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

func TestOpenPolicy(t *testing.T) {
	p, err := New(nil)
	if err != nil || !p.IsOpen() {
		t.Fatalf("New(nil) = %v, %v; want the open policy", p, err)
	}
	pr, err := p.Resolve(subjects.Principal{})
	if err != nil || pr.Tenant != "local" || pr.User != "local" {
		t.Fatalf("Resolve(empty) = %+v, %v", pr, err)
	}
	if d := p.Decide(pr, Tool{Server: "ticketing", Name: "createIssue"}); !d.Allowed || d.NeedsApproval {
		t.Errorf("open policy: %+v", d)
	}
	if d := p.Decide(pr, Tool{Server: "ticketing", Name: "closeIssue", Destructive: true}); !d.Allowed || !d.NeedsApproval {
		t.Errorf("open policy, destructive tool: %+v, want allowed with approval", d)
	}
}

func TestDecide(t *testing.T) {
	no := false
	cfg := &Config{
		Principals: map[string]PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"dev"}},
			"bob":   {Tenant: "acme", Roles: []string{"support"}},
			"eve":   {Tenant: "other"},
		},
		Rules: []Rule{
			{Name: "devs", Roles: []string{"dev"}, Allow: []string{"*"}, Deny: []string{"payments__*"}, Approve: []string{"ticketing__createIssue"}},
			{Name: "support", Roles: []string{"support"}, Allow: []string{"ticketing__list*", "kb__*"}},
			{Name: "odd names", Tenants: []string{"acme"}, Allow: []string{"Ant Design/x__get*"}},
		},
		ApproveDestructive: &no,
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := p.Resolve(subjects.Principal{User: "alice", Roles: []string{"admin"}})
	if err != nil || alice.Tenant != "acme" || len(alice.Roles) != 1 || alice.Roles[0] != "dev" {
		t.Fatalf("Resolve(alice) = %+v, %v: roles must come from the config", alice, err)
	}
	bob, _ := p.Resolve(subjects.Principal{User: "bob"})
	tests := []struct {
		name          string
		pr            subjects.Principal
		tool          Tool
		allowed, appr bool
	}{
		{"dev any tool", alice, Tool{Server: "logging", Name: "getLogs"}, true, false},
		{"deny wins", alice, Tool{Server: "payments", Name: "refund"}, false, false},
		{"approve pattern", alice, Tool{Server: "ticketing", Name: "createIssue"}, true, true},
		{"destructive without approval (configured off)", alice, Tool{Server: "ticketing", Name: "closeIssue", Destructive: true}, true, false},
		{"support glob", bob, Tool{Server: "ticketing", Name: "listIssues"}, true, false},
		{"support not allowed", bob, Tool{Server: "ticketing", Name: "createIssue"}, false, false},
		{"slash in names", bob, Tool{Server: "Ant Design/x", Name: "getDocs"}, true, false},
		// The pattern's first "__" separates server from tool: "kb__*" is server kb's tools only.
		{"server holding __", bob, Tool{Server: "kb__admin", Name: "drop"}, false, false},
		{"tool holding __", bob, Tool{Server: "kb", Name: "admin__drop"}, true, false},
		{"deny of a tool holding __", alice, Tool{Server: "payments", Name: "x__y"}, false, false},
		{"deny is not of a server holding __", alice, Tool{Server: "payments__sandbox", Name: "x"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.pr, tt.tool)
			if d.Allowed != tt.allowed || d.NeedsApproval != tt.appr {
				t.Errorf("Decide = %+v, want allowed=%v approval=%v", d, tt.allowed, tt.appr)
			}
			if d.Why == "" {
				t.Error("no reason")
			}
		})
	}
	for _, pr := range []subjects.Principal{{User: "mallory"}, {}, {User: "eve", Tenant: "acme"}} {
		if _, err := p.Resolve(pr); !errors.Is(err, ErrUnknownPrincipal) {
			t.Errorf("Resolve(%+v) error = %v, want ErrUnknownPrincipal", pr, err)
		}
	}
}

func TestNewRejectsBadPatterns(t *testing.T) {
	for _, pat := range []string{"[", ""} {
		if _, err := New(&Config{Rules: []Rule{{Allow: []string{pat}}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("pattern %q: error = %v, want ErrInvalid", pat, err)
		}
	}
}

func TestMayUseScope(t *testing.T) {
	p := Open()
	alice := subjects.Principal{Tenant: "acme", User: "alice"}
	tests := []struct {
		pr         subjects.Principal
		scope, ctx string
		want       bool
	}{
		{alice, "", "", true},
		{alice, subjects.ScopePublic, "tenant:other", true},
		{alice, subjects.ScopePrivate, "tenant:acme", true},
		{alice, subjects.ScopePrivate, "tenant:other", false},
		{alice, subjects.ScopePrivate, "tenant:acme/user:alice", true},
		{alice, subjects.ScopePrivate, "tenant:acme/user:bob", false},
		{alice, subjects.ScopePrivate, "", false},
		{Local, subjects.ScopePrivate, "", true},
		{alice, subjects.ScopePrivate, "weird", false},
		// A scope stored before snapshots were normalized (an on-disk catalog): fails closed.
		{alice, "Private", "tenant:other", false},
		{alice, "shared", "tenant:other", false},
		{alice, "Private", "tenant:acme", true},
		{alice, "PUBLIC", "tenant:other", true},
	}
	for _, tt := range tests {
		if got := p.MayUseScope(tt.pr, tt.scope, tt.ctx); got != tt.want {
			t.Errorf("MayUseScope(%+v, %q, %q) = %v, want %v", tt.pr, tt.scope, tt.ctx, got, tt.want)
		}
	}
}
