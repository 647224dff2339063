package main

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigNestedMergesDecodeAlike: mappings that merge, and large ones, are decoded as
// merges of chunks (chunkMapping), whatever their size for the former: what env decodes to is
// what yaml makes of it as written, for random mappings of 0 to 300 keys (about mapChunk
// too) with nested merges of mappings or lists of them, new or aliased, and empty values (null
// ones are refused: TestConfigNullValuesRefused).
func TestConfigNestedMergesDecodeAlike(t *testing.T) {
	for seed := range 60 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		anchors := 0
		var names []string
		var gen func(depth int) string
		gen = func(depth int) string {
			var parts []string
			sizes := []int{0, 1, 5, 127, 128, 129, 200, 300}
			n := sizes[rng.IntN(len(sizes))]
			for _, k := range rng.Perm(3 * (n + 1))[:n] {
				v := fmt.Sprintf("v%d", rng.IntN(100))
				if rng.IntN(20) == 0 {
					v = "''"
				}
				parts = append(parts, fmt.Sprintf("K%d: %s", k, v))
			}
			if depth < 3 && rng.IntN(2) == 0 {
				var items []string
				for range 1 + rng.IntN(3) {
					if len(names) > 0 && rng.IntN(2) == 0 {
						items = append(items, "*"+names[rng.IntN(len(names))])
					} else {
						items = append(items, gen(depth+1))
					}
				}
				m := items[0]
				if len(items) > 1 || rng.IntN(2) == 0 {
					m = "[" + strings.Join(items, ", ") + "]"
				}
				pos := rng.IntN(len(parts) + 1)
				parts = slices.Insert(parts, pos, "<<: "+m)
			}
			body := "{" + strings.Join(parts, ", ") + "}"
			if rng.IntN(2) == 0 {
				anchors++
				a := fmt.Sprintf("a%d", anchors)
				body = "&" + a + " " + body
				names = append(names, a)
			}
			return body
		}
		var doc strings.Builder
		doc.WriteString("servers:\n")
		for i := range 4 {
			fmt.Fprintf(&doc, "  - {name: s%d, command: x, env: %s}\n", i, gen(0))
		}
		var want struct {
			Servers []serverEntry `yaml:"servers"`
		}
		werr := yaml.Unmarshal([]byte(doc.String()), &want)
		cfg, err := parseConfig("c.yaml", []byte(doc.String()), noEnv)
		if werr != nil {
			t.Fatalf("seed %d: %v", seed, werr)
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i, s := range cfg.ServerConfigs() {
			w := want.Servers[i].Env
			if len(w) == 0 && len(s.Env) == 0 {
				continue
			}
			if !reflect.DeepEqual(w, s.Env) {
				t.Errorf("seed %d: server %d differs: %d vs %d keys", seed, i, len(w), len(s.Env))
			}
		}
	}
}
