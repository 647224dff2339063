package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigChunkedMappingsDecodeAlike: the large mappings chunkMapping rewrites decode to what
// yaml makes of them as written: random env mappings of up to 400 keys, some with merges (of
// one mapping or a list, aliased or not, themselves large or small, with keys in common).
func TestConfigChunkedMappingsDecodeAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mapping := func(prefix string, n int) string {
		var b strings.Builder
		b.WriteString("{")
		for _, k := range rng.Perm(2 * n)[:n] {
			fmt.Fprintf(&b, "%s%d: %s%d, ", prefix, k, prefix, rng.IntN(1000))
		}
		b.WriteString("}")
		return b.String()
	}
	for seed := range 40 {
		var doc strings.Builder
		fmt.Fprintf(&doc, "servers:\n  - {name: m, command: x, env: &m1 %s}\n", mapping("K", 50+rng.IntN(300)))
		fmt.Fprintf(&doc, "  - {name: n, command: x, env: &m2 %s}\n", mapping("K", 1+rng.IntN(200)))
		var merge string
		switch seed % 4 {
		case 0:
			merge = "*m1"
		case 1:
			merge = "[*m2, *m1]"
		case 2:
			merge = "[" + mapping("K", 150) + ", *m2]"
		case 3:
			merge = mapping("J", 20)
		}
		fmt.Fprintf(&doc, "  - name: a\n    command: x\n    env: {<<: %s, %s\n", merge, strings.TrimPrefix(mapping("K", 1+rng.IntN(400)), "{"))
		var want struct {
			Servers []serverEntry `yaml:"servers"`
		}
		if err := yaml.Unmarshal([]byte(doc.String()), &want); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		cfg, err := parseConfig("c.yaml", []byte(doc.String()), noEnv)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(cfg.ServerConfigs()) != 3 {
			t.Fatalf("seed %d: %d servers", seed, len(cfg.ServerConfigs()))
		}
		for i, s := range cfg.ServerConfigs() {
			w := want.Servers[i].Env
			if len(s.Env) != len(w) {
				t.Errorf("seed %d: server %s: %d keys, want %d as yaml decodes them", seed, s.Name, len(s.Env), len(w))
			}
			for k, v := range w {
				if s.Env[k] != v {
					t.Errorf("seed %d: server %s: %s=%q, want %q as yaml decodes it", seed, s.Name, k, s.Env[k], v)
					break
				}
			}
		}
	}
}
