package main

import (
	"strings"
	"testing"
)

// TestConfigMergeIntoMaps: a merge key (<<) in a mapping of names (env, headers, principals,
// limits) was checked as one more name, its value as one entry's: "field <<: cannot unmarshal
// !!map into string", though yaml merges it as anywhere else. Its keys are checked as the
// mapping's own, and a misspelt field under one of them is still found.
func TestConfigMergeIntoMaps(t *testing.T) {
	y := `
servers:
  - name: a
    command: x
    env: {<<: &env {MODE: ro, LANG: C}, LANG: fr}
  - name: b
    url: https://mcp.example.com/mcp
    headers:
      <<: [{X-One: "1"}, {X-Two: "2"}]
policy:
  principals:
    <<: {alice: &p {tenant: acme, roles: [dev]}}
    bob: *p
  rules: [{name: r, roles: [dev], allow: ["*"]}]
limits:
  servers:
    <<: {a: {perSecond: 1}}
    b: {perSecond: 2}
`
	cfg, err := parseConfig("c.yaml", []byte(y), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.ServerConfigs()
	if env := srv[0].Env; len(env) != 2 || env["MODE"] != "ro" || env["LANG"] != "fr" {
		t.Errorf("env %v, want MODE=ro LANG=fr", env)
	}
	if h := srv[1].Headers; len(h) != 2 || h["X-One"] != "1" || h["X-Two"] != "2" {
		t.Errorf("headers %v", h)
	}
	if p := cfg.Policy.Principals; len(p) != 2 || p["alice"].Tenant != "acme" || p["bob"].Tenant != "acme" {
		t.Errorf("principals %v", p)
	}
	if l := cfg.Limits.Servers; len(l) != 2 || l["a"].PerSecond != 1 || l["b"].PerSecond != 2 {
		t.Errorf("limits.servers %v", l)
	}

	// What a merge brings in is checked as the mapping's own entries are.
	_, err = parseConfig("c.yaml", []byte("servers: []\nlimits:\n  servers:\n    <<: {a: {perSecond: 1, brust: 2}}\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "field brust: unknown field") {
		t.Errorf("%v: want brust refused", err)
	}
}

// TestConfigPrincipalsEmptyByMergeRefused: principals: {} is refused (it would let any user act
// with the roles its requests claim), but a principals mapping holding only merges that bring
// nothing ({<<: {}}, a list of empty mappings, an alias of one) decodes to the same empty map
// and was accepted: the closed list of users silently became no list at all.
func TestConfigPrincipalsEmptyByMergeRefused(t *testing.T) {
	for name, p := range map[string]string{
		"empty merge":       "{<<: {}}",
		"list of empties":   "{<<: [{}, {}]}",
		"nested":            "{<<: {<<: [{}, {<<: {}}]}}",
		"alias of an empty": "{<<: [*e, *e]}",
	} {
		y := "servers: []\nlimits: {servers: &e {}}\npolicy:\n  principals: " + p + "\n  rules: [{name: r, roles: [admin], allow: ['*']}]\n"
		_, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err == nil || !strings.Contains(err.Error(), "c.yaml:4: policy: field principals: empty, which would let any user act") {
			t.Errorf("%s: %v: want principals refused as empty", name, err)
		}
	}
	// A merge that brings a principal in is a list of users.
	cfg, err := parseConfig("c.yaml", []byte("servers: []\npolicy:\n  principals: {<<: [{}, {alice: {roles: [admin]}}]}\n  rules: []\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Policy.Principals) != 1 {
		t.Errorf("principals %v", cfg.Policy.Principals)
	}
}

// TestConfigSelfMergeRefused: a mapping that merges itself (&a {<<: *a}, directly or further
// down) was followed by emptyMapping, asked of every field's mapping, until the stack overflowed:
// a fatal error of the whole process, not a configuration error. yaml refuses it.
func TestConfigSelfMergeRefused(t *testing.T) {
	for _, y := range []string{
		"servers:\n  - {name: a, command: x, env: &e {<<: *e, K: v}}\n",
		"servers:\n  - {name: a, command: x, env: &e {<<: [{}, {<<: *e}]}}\n",
		"servers: []\npolicy:\n  principals: &p {<<: *p}\n  rules: []\n",
	} {
		_, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err == nil || !strings.Contains(err.Error(), "value contains itself") {
			t.Errorf("%q: %v, want refused", y, err)
		}
	}
}
