package policy

import (
	"encoding/json"
	"testing"

	"go.yaml.in/yaml/v3"
)

func mustDigestYAML(t *testing.T, doc string) string {
	t.Helper()
	var cfg *Config
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatalf("yaml: %v\n%s", err, doc)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v\n%s", err, doc)
	}
	return p.Digest()
}

// The same policy, written in every way a configuration can write it, has one digest.
func TestDigestIgnoresHowThePolicyIsWritten(t *testing.T) {
	block := `
principals:
  alice: {tenant: acme, roles: [dev, support]}
  ops:   {roles: [admin]}
rules:
  - name: devs
    roles: [dev]
    allow: ["*"]
    deny: ["payments__*", "billing__*"]
    approve: [ticketing__createIssue]
  - name: admins
    tenants: [local]
    roles: [admin]
    allow: ["kb__*"]
`
	// Keys and principals in another order, flow style, lists reordered and repeated, the
	// default tenant and approveDestructive written out, other whitespace.
	flow := `{approveDestructive: true, rules: [
  {approve: [ticketing__createIssue, ticketing__createIssue], deny: ["billing__*", "payments__*"], allow: ["*"], roles: [dev], name: devs},
  {allow: ["kb__*"], roles: [admin, admin], name: admins, tenants: [local]}],
 principals: {ops: {roles: [admin], tenant: local}, alice: {roles: [support, dev, dev], tenant: acme}}}`
	var asJSON Config
	if err := yaml.Unmarshal([]byte(block), &asJSON); err != nil {
		t.Fatal(err)
	}
	data, _ := json.MarshalIndent(asJSON, "", "\t")
	jsonDoc := string(data) // JSON is YAML

	want := mustDigestYAML(t, block)
	if !DigestPattern.MatchString(want) {
		t.Fatalf("digest %q does not match DigestPattern", want)
	}
	for name, doc := range map[string]string{"flow": flow, "json": jsonDoc} {
		if got := mustDigestYAML(t, doc); got != want {
			t.Errorf("%s: digest %s, want %s (the block form's)", name, got, want)
		}
	}
	// Compiling twice, or asking twice, gives the same digest (no map order leaks in).
	for range 20 {
		if got := mustDigestYAML(t, block); got != want {
			t.Fatalf("digest changed between compilations: %s, then %s", want, got)
		}
	}
}

// Every change of what the policy decides changes the digest; each change gives a digest of
// its own.
func TestDigestChangesWithEveryRule(t *testing.T) {
	base := func() *Config {
		return &Config{
			Principals: map[string]PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"dev"}}},
			Rules: []Rule{
				{Name: "devs", Roles: []string{"dev"}, Allow: []string{"*"}, Deny: []string{"payments__*"}},
				{Name: "kb", Tenants: []string{"acme"}, Allow: []string{"kb__*"}, Approve: []string{"kb__delete*"}},
			},
		}
	}
	no := false
	changes := map[string]func(c *Config){
		"base":                      func(*Config) {},
		"allow pattern":             func(c *Config) { c.Rules[1].Allow = []string{"kb__search*"} },
		"allow added":               func(c *Config) { c.Rules[1].Allow = append(c.Rules[1].Allow, "wiki__*") },
		"deny removed":              func(c *Config) { c.Rules[0].Deny = nil },
		"deny moved to allow":       func(c *Config) { c.Rules[0].Deny, c.Rules[0].Allow = nil, []string{"*", "payments__*"} },
		"approve added":             func(c *Config) { c.Rules[0].Approve = []string{"ticketing__*"} },
		"approve removed":           func(c *Config) { c.Rules[1].Approve = nil },
		"tenant of rule":            func(c *Config) { c.Rules[1].Tenants = []string{"globex"} },
		"users of rule":             func(c *Config) { c.Rules[1].Users = []string{"alice"} },
		"roles of rule":             func(c *Config) { c.Rules[0].Roles = []string{"dev", "ops"} },
		"rule renamed":              func(c *Config) { c.Rules[0].Name = "developers" },
		"rules reordered":           func(c *Config) { c.Rules[0], c.Rules[1] = c.Rules[1], c.Rules[0] },
		"rule removed":              func(c *Config) { c.Rules = c.Rules[:1] },
		"rule added":                func(c *Config) { c.Rules = append(c.Rules, Rule{Allow: []string{"x__y"}}) },
		"principal tenant":          func(c *Config) { c.Principals["alice"] = PrincipalConfig{Tenant: "globex", Roles: []string{"dev"}} },
		"principal roles":           func(c *Config) { c.Principals["alice"] = PrincipalConfig{Tenant: "acme"} },
		"principal added":           func(c *Config) { c.Principals["bob"] = PrincipalConfig{Tenant: "acme"} },
		"principal renamed":         func(c *Config) { c.Principals = map[string]PrincipalConfig{"alicia": c.Principals["alice"]} },
		"principals removed":        func(c *Config) { c.Principals = nil },
		"approveDestructive false":  func(c *Config) { c.ApproveDestructive = &no },
		"pattern moved across rule": func(c *Config) { c.Rules[0].Deny, c.Rules[1].Deny = nil, []string{"payments__*"} },
		"values moved across lists": func(c *Config) { c.Rules[1].Tenants, c.Rules[1].Users = nil, []string{"acme"} },
	}
	seen := map[string]string{Open().Digest(): "open policy"}
	for name, change := range changes {
		cfg := base()
		change(cfg)
		p, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := p.Digest()
		if other, dup := seen[d]; dup {
			t.Errorf("%s and %s have the same digest %s", name, other, d)
		}
		seen[d] = name
	}
}

// The open policy (no policy section) has its own digest, distinct from a configured policy
// that denies everything and from one that allows everything; New(nil) is the open policy.
func TestDigestOfOpenPolicy(t *testing.T) {
	open := Open().Digest()
	if !DigestPattern.MatchString(open) {
		t.Fatalf("open digest %q does not match DigestPattern", open)
	}
	if p, _ := New(nil); p.Digest() != open {
		t.Errorf("New(nil) digest %s, want the open policy's %s", p.Digest(), open)
	}
	empty, _ := New(&Config{})
	denyAll, _ := New(&Config{Rules: []Rule{}})
	allowAll, _ := New(&Config{Rules: []Rule{{Allow: []string{"*"}}}})
	if empty.Digest() != denyAll.Digest() {
		t.Errorf("policy: {} and policy: {rules: []} decide alike, digests %s and %s", empty.Digest(), denyAll.Digest())
	}
	for name, p := range map[string]*Policy{"deny everything": denyAll, "allow everything": allowAll} {
		if p.Digest() == open {
			t.Errorf("%s has the open policy's digest %s", name, open)
		}
	}
	// A zero Policy (not from New or Open) still has a digest.
	if d := (&Policy{}).Digest(); !DigestPattern.MatchString(d) {
		t.Errorf("zero Policy digest %q", d)
	}
}

// The canonical form is pinned: processes of two mcpstream versions compare digests, so a change
// of what is hashed or how needs a new digestVersion (and a new prefix), never new digests
// under "v1-".
func TestDigestCanonicalFormPinned(t *testing.T) {
	if got, want := Open().Digest(), openDigestV1; got != want {
		t.Errorf("open policy digest %s, want %s: the canonical form changed; bump digestVersion", got, want)
	}
	p, err := New(&Config{
		Principals: map[string]PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"dev"}}},
		Rules:      []Rule{{Name: "devs", Roles: []string{"dev"}, Allow: []string{"*"}, Deny: []string{"payments__*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Digest(), sampleDigestV1; got != want {
		t.Errorf("sample policy digest %s, want %s: the canonical form changed; bump digestVersion", got, want)
	}
}

const (
	openDigestV1   = "v1-29d5e78c7ab749ac3e05bb1cb2a727cc"
	sampleDigestV1 = "v1-063b9dc769bbffbfddf39f2f0d4dcc64"
)
