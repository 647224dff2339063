package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// A rule's tenants, users or roles list left empty matches anyone, and an empty principals list
// is no list: users and roles are then taken from the requests. A key whose entries are all
// commented out (or written []) decoded so, and widened the policy: the rule "only alice"
// allowed everyone, the closed list of users let anyone act with any role it claimed. It is
// refused, as "policy:" with nothing under it is; a merge ("<<:") of a null policy too.
func TestPolicyEmptyListsRefused(t *testing.T) {
	const servers = "servers:\n  - {name: a, command: x}\n"
	for name, c := range map[string]struct{ doc, field string }{
		"users commented out": {servers + "policy:\n  rules:\n    - name: break-glass\n      users:\n        # - alice\n      allow: ['*']\n", "users"},
		"users []":            {servers + "policy:\n  rules:\n    - {name: r, users: [], allow: ['*']}\n", "users"},
		"roles null":          {servers + "policy:\n  rules:\n    - {name: r, roles: ~, allow: ['*']}\n", "roles"},
		"tenants alias null":  {"servers:\n  - {name: a, command: x, description: &none ~}\npolicy:\n  rules:\n    - {name: r, tenants: *none, allow: ['*']}\n", "tenants"},
		"principals null":     {servers + "policy:\n  principals:\n    # alice: {roles: [admin]}\n  rules:\n    - {name: admins, roles: [admin], allow: ['*']}\n", "principals"},
		"principals {}":       {servers + "policy:\n  principals: {}\n  rules:\n    - {name: admins, roles: [admin], allow: ['*']}\n", "principals"},
		"merged rule":         {servers + "policy:\n  rules:\n    - {<<: {users: []}, name: r, allow: ['*']}\n", "users"},
		"merged policy null":  {servers + "<<: {policy: ~}\n", "policy"},
	} {
		cfg, err := parseConfig("c.yaml", []byte(c.doc), lookupTest)
		if err == nil {
			// What it decoded to: who may call a__b.
			p, perr := policy.New(cfg.Policy)
			if perr != nil {
				t.Errorf("%s: parsed, but policy.New: %v", name, perr)
				continue
			}
			pr, rerr := p.Resolve(subjects.Principal{User: "mallory", Roles: []string{"admin"}})
			t.Errorf("%s: accepted; mallory claiming admin resolves to %+v (%v) and may call a__b: %v", name, pr, rerr,
				rerr == nil && p.Decide(pr, policy.Tool{Server: "a", Name: "b"}).Allowed)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v; want a configuration error naming %s", name, err, c.field)
		}
	}
	// "*" says anyone; a key left out, too.
	for _, doc := range []string{
		servers + "policy:\n  rules:\n    - {name: r, users: ['*'], allow: ['*']}\n",
		servers + "policy:\n  rules:\n    - {name: r, allow: ['*']}\n",
		servers + "policy:\n  principals: {alice: {}}\n  rules: []\n",
	} {
		if _, err := parseConfig("c.yaml", []byte(doc), lookupTest); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// Policy patterns (and limits.tools) match server names as globs: a server named "prod[eu]" was
// accepted, and the deny "prod[eu]__*", written as its name reads, matched the servers "prode"
// and "produ", never it: a deny that silently denied nothing (and an allow "a*__x" meant for a
// server "a*" allowed the tools x of every server whose name starts with "a"). Such names are
// refused.
func TestServerNameWithGlobCharactersRefused(t *testing.T) {
	for _, name := range []string{"prod[eu]", "a*", "who?", `back\slash`} {
		doc := "servers:\n  - {name: '" + name + "', command: x}\npolicy:\n  rules:\n    - {name: r, allow: ['*'], deny: ['" + name + "__*']}\n"
		cfg, err := parseConfig("c.yaml", []byte(doc), lookupTest)
		if err == nil {
			p, perr := policy.New(cfg.Policy)
			if perr != nil {
				t.Fatalf("%s: policy.New: %v", name, perr)
			}
			t.Errorf("server %q accepted; under the deny %q, local may call its tool drop: %v", name, name+"__*",
				p.Decide(policy.Local, policy.Tool{Server: name, Name: "drop"}).Allowed)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "field name") {
			t.Errorf("%s: error %v; want a configuration error of the server's name", name, err)
		}
	}
}
