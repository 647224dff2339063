package main

import (
	"fmt"
	"strings"
	"testing"
)

// principalsDoc is a configuration whose principals mapping holds n users u0..u(n-1) (u5 with
// the anchor &k, its roles [r5]), then extra, lines of that mapping.
func principalsDoc(n int, extra string) string {
	var b strings.Builder
	b.WriteString("servers: []\npolicy:\n  rules: [{name: r, roles: [admin], allow: ['*']}]\n  principals:\n")
	for i := range n {
		anchor := ""
		if i == 5 {
			anchor = "&k "
		}
		fmt.Fprintf(&b, "    %su%d: {roles: [r%d]}\n", anchor, i, i)
	}
	b.WriteString(extra)
	return b.String()
}

// TestConfigRepeatedKeysThroughAliasesRefused: repeats were found by the key's node (kind and
// text), as yaml.v3 finds them, so a key written as an alias of an earlier one (*k) or as
// !!binary missed it, though both decode to the same name. yaml.v3 kept the last; once the
// mapping was decoded in chunks (over mapChunk keys) the first won: u5 kept roles [r5] in a
// large principals mapping and got [admin] in a small one. Both are refused as repeats.
func TestConfigRepeatedKeysThroughAliasesRefused(t *testing.T) {
	line := func(n int) int { return 4 + n + 1 }
	for _, n := range []int{10, 2 * mapChunk} {
		for name, extra := range map[string]string{
			"alias":  "    *k : {roles: [admin]}\n",
			"binary": "    !!binary dTU=: {roles: [admin]}\n", // "u5"
		} {
			_, err := parseConfig("c.yaml", []byte(principalsDoc(n, extra)), noEnv)
			want := fmt.Sprintf(`c.yaml:%d: policy: field principals.u5: mapping key "u5" already defined at line 10`, line(n))
			if err == nil || err.Error() != want {
				t.Errorf("%s, %d principals: %v, want %q", name, n, err, want)
			}
		}
	}
	// A field of a struct given twice so is refused too, by its name.
	_, err := parseConfig("c.yaml", []byte("servers:\n  - {&n name: a, command: x, *n : b}\n"), noEnv)
	if want := `c.yaml:2: servers[0] (a): field name: mapping key "name" already defined at line 2`; err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
}

// TestConfigOwnKeysWinOverMergedKeys: the keys of a mapping win over those a merge brings in.
// yaml.v3 compares them as it decodes them without a type, so an own key that is not a string
// there (1001, true) lost to the merged one: principal 1001 kept the roles [admin] of the
// defaults it meant to narrow to [viewer], in a mapping of up to mapChunk keys, and got [viewer]
// in a larger one.
func TestConfigOwnKeysWinOverMergedKeys(t *testing.T) {
	for _, n := range []int{0, 10, 2 * mapChunk} {
		y := principalsDoc(n, "    <<: {1001: {roles: [admin]}, true: {roles: [admin]}, u1: {roles: [admin]}, m: {roles: [m]}}\n"+
			"    1001: {roles: [viewer]}\n    true: {roles: [viewer]}\n")
		cfg, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err != nil {
			t.Fatalf("%d principals: %v", n, err)
		}
		p := cfg.Policy.Principals
		for k, want := range map[string]string{"1001": "viewer", "true": "viewer", "m": "m"} {
			if got := strings.Join(p[k].Roles, ","); got != want {
				t.Errorf("%d principals: %s has roles %q, want %q", n, k, got, want)
			}
		}
		if n > 1 && strings.Join(p["u1"].Roles, ",") != "r1" {
			t.Errorf("%d principals: u1 has roles %v, want r1", n, p["u1"].Roles)
		}
		want := n + 3 // 1001, true, m
		if n <= 1 {
			want++ // u1, merged
		}
		if len(p) != want {
			t.Errorf("%d principals: %d decoded, want %d", n, len(p), want)
		}
	}
}

// TestConfigQuotedMergeNameKeptInLargeMappings: "<<" quoted is a name, not a merge. A large
// mapping decoded in chunks merged into it lost it: yaml.v3 counts the merge key itself among
// the mapping's own keys, which win over what the chunks bring.
func TestConfigQuotedMergeNameKeptInLargeMappings(t *testing.T) {
	for _, n := range []int{10, 2 * mapChunk} {
		cfg, err := parseConfig("c.yaml", []byte(principalsDoc(n, "    \"<<\": {roles: [lit]}\n")), noEnv)
		if err != nil {
			t.Fatalf("%d principals: %v", n, err)
		}
		if p := cfg.Policy.Principals; len(p) != n+1 || strings.Join(p["<<"].Roles, ",") != "lit" {
			t.Errorf("%d principals: %d decoded, << has roles %v", n, len(p), p["<<"].Roles)
		}
	}
}

// TestConfigAliasKeysNameTheirField: a key written as an alias (*n) was checked by its text,
// the anchor's name: "field n: unknown field", though it decodes to the field it repeats.
func TestConfigAliasKeysNameTheirField(t *testing.T) {
	y := "servers:\n  - {&n name: a, &c command: x, env: {&k K: v}}\n  - {*n : b, *c : y, env: {*k : w}}\n"
	cfg, err := parseConfig("c.yaml", []byte(y), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.ServerConfigs(); len(s) != 2 || s[1].Name != "b" || s[1].Env["K"] != "w" {
		t.Errorf("servers %+v", s)
	}
}

// TestConfigNullMapKeysRefused: a key that is null (null, ~, Null, nothing) decodes to no name,
// and yaml.v3 leaves its entry out of the map without a word: principals: {null: {roles:
// [admin]}} decoded to no principals, which lets any user act with the roles its requests claim
// (the policy principals: {} is refused for), and env: {null: v} to no variable.
func TestConfigNullMapKeysRefused(t *testing.T) {
	for p, want := range map[string]string{
		"principals: {null: {roles: [admin]}}":               `c.yaml:3: policy: field principals.null: a null key, which yaml leaves out: quote it ("null") for that name`,
		"principals: {alice: {roles: [a]}, ~: {roles: [b]}}": `c.yaml:3: policy: field principals.~: a null key, which yaml leaves out: quote it ("~") for that name`,
	} {
		y := "servers: []\npolicy:\n  " + p + "\n  rules: [{name: r, roles: [admin], allow: ['*']}]\n"
		_, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", p, err, want)
		}
	}
	_, err := parseConfig("c.yaml", []byte("servers:\n  - {name: a, command: x, env: {K: w, Null: v}}\n"), noEnv)
	if want := `c.yaml:2: servers[0] (a): field env.Null: a null key, which yaml leaves out: quote it ("Null") for that name`; err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
	// Quoted, it is a name.
	cfg, err := parseConfig("c.yaml", []byte("servers: []\npolicy:\n  principals: {\"null\": {roles: [admin]}}\n  rules: []\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Policy.Principals["null"]; !ok || len(cfg.Policy.Principals) != 1 {
		t.Errorf("principals %v", cfg.Policy.Principals)
	}
}
