package policy

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/mcpstream/mcpstream/subjects"
)

// A configuration can hold strings that are not UTF-8 (YAML's !!binary decodes into a string
// field as the raw bytes). The digest hashes the policy's JSON, which writes every invalid byte
// as U+FFFD: two policies that decide apart had one digest, so `policy check` called them
// alike. And names that come to the policy as JSON (tool, server, user and role names of
// requests and registry events) never hold such bytes, so a pattern or a name holding them
// matches nothing: a deny written so silently denied nothing. Both are refused.
func TestNewRefusesInvalidUTF8(t *testing.T) {
	decode := func(doc string) *Config {
		t.Helper()
		var cfg *Config
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			t.Fatalf("yaml: %v\n%s", err, doc)
		}
		return cfg
	}
	// Alice's role is the byte 0xff in one, 0xfe in the other; the rule admits role 0xff.
	a := decode(`{principals: {alice: {roles: [!!binary "/w=="]}}, rules: [{roles: [!!binary "/w=="], allow: ["*"]}]}`)
	b := decode(`{principals: {alice: {roles: [!!binary "/g=="]}}, rules: [{roles: [!!binary "/w=="], allow: ["*"]}]}`)
	pa, errA := New(a)
	pb, errB := New(b)
	if errA == nil && errB == nil {
		tool := Tool{Server: "kb", Name: "get"}
		ra, _ := pa.Resolve(subjects.Principal{User: "alice"})
		rb, _ := pb.Resolve(subjects.Principal{User: "alice"})
		da, db := pa.Decide(ra, tool).Allowed, pb.Decide(rb, tool).Allowed
		if da != db && pa.Digest() == pb.Digest() {
			t.Errorf("two policies that decide apart (alice allowed: %v, %v) have one digest %s", da, db, pa.Digest())
		}
	}
	for name, cfg := range map[string]*Config{
		"principal role": a,
		"deny pattern":   decode(`{rules: [{allow: ["*"], deny: [!!binary "a2JfX2Rl/yo="]}]}`), // "kb__de\xff*"
		"allow pattern":  {Rules: []Rule{{Allow: []string{"kb__\xff*"}}}},
		"approve":        {Rules: []Rule{{Allow: []string{"*"}, Approve: []string{"kb__\xfe"}}}},
		"rule name":      {Rules: []Rule{{Name: "x\xff", Allow: []string{"*"}}}},
		"rule tenant":    {Rules: []Rule{{Tenants: []string{"\xff"}, Deny: []string{"*"}}}},
		"rule user":      {Rules: []Rule{{Users: []string{"bob\xff"}, Deny: []string{"*"}}}},
		"rule role":      {Rules: []Rule{{Roles: []string{"\xc3"}, Allow: []string{"*"}}}},
		"principal name": {Principals: map[string]PrincipalConfig{"al\xffice": {}}},
		"principal key":  {Principals: map[string]PrincipalConfig{"ac\xffme/alice": {}}},
		"tenant":         {Principals: map[string]PrincipalConfig{"alice": {Tenant: "ac\xffme"}}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid (not UTF-8)", name, err)
		}
	}
	if _, err := New(&Config{Rules: []Rule{{Name: "café", Roles: []string{"überadmin"}, Allow: []string{"wörter__*"}}}}); err != nil {
		t.Errorf("UTF-8 names: %v", err)
	}
}
