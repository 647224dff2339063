package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigDuplicateKeysReportedOnce: yaml.v3 compares every key of a mapping with every other
// and reports each pair of equal keys, so k copies of one key gave k²/2 problems: a 60 KB file
// of one field repeated 5000 times took 42 s and 7.6 GB before its error (a 4 MiB one, far more
// memory than any machine has). Each key defined again is reported once, naming the first.
func TestConfigDuplicateKeysReportedOnce(t *testing.T) {
	const k = 300
	for name, y := range map[string]string{
		"struct": "servers:\n  - {name: a, command: x" + strings.Repeat(", command: x", k) + "}\n",
		"map":    "servers:\n  - {name: a, command: x, env: {A: b" + strings.Repeat(", A: b", k) + "}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig("c.yaml", []byte(y), noEnv)
			if err == nil {
				t.Fatal("accepted duplicate keys")
			}
			lines := strings.Split(err.Error(), "\n")
			if want := fmt.Sprintf("c.yaml: and %d more problems", k-maxConfigErrors); lines[len(lines)-1] != want {
				t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
			}
			field := map[string]string{"struct": `servers[0] (a): field command: mapping key "command"`,
				"map": `servers[0] (a): field env.A: mapping key "A"`}[name]
			if want := "c.yaml:2: " + field + " already defined at line 2"; lines[0] != want {
				t.Errorf("first line %q, want %q", lines[0], want)
			}
		})
	}
}

// TestConfigLargeMappingsDecodedInChunks: yaml.v3 compares every key of a mapping with every
// other before decoding it (even into a string, to refuse it): an env, headers, principals or
// limits mapping of n keys took n² steps, about 3 s for 40,000 keys and minutes for the 4 MiB a
// file may hold. Once its keys are known to differ, a large mapping is decoded in chunks
// merged into it, each of at most mapChunk keys; what it decodes to is unchanged.
func TestConfigLargeMappingsDecodedInChunks(t *testing.T) {
	const n = 3000
	var b strings.Builder
	b.WriteString("base: &base {M1: merged, K7: merged}\nservers:\n  - name: a\n    command: x\n    description: {")
	for i := range n {
		fmt.Fprintf(&b, "D%d: v, ", i)
	}
	b.WriteString("}\n  - name: b\n    command: x\n    env:\n      <<: *base\n")
	for i := range n {
		fmt.Fprintf(&b, "      K%d: v%d\n", i, i)
	}
	data := []byte(b.String())

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	// The document as the configuration would be, without its base: key.
	root := doc.Content[0]
	root.Content = root.Content[2:]
	w := &shapeWalker{file: "c.yaml", where: map[int]string{}}
	w.walk(root, reflect.TypeFor[fileConfig](), "")
	if len(w.errs) != 1 || !strings.Contains(w.errs[0].Error(), "field description: want a string, got a mapping") {
		t.Fatalf("errors %v, want one for description", w.errs)
	}
	big := 0
	var visit func(*yaml.Node)
	visit = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode && len(n.Content)/2 > mapChunk && n != descriptionOf(root) {
			big++
		}
		for _, c := range n.Content {
			visit(c)
		}
	}
	visit(root)
	if big > 0 {
		t.Errorf("%d mappings of more than %d keys left to decode", big, mapChunk)
	}

	// Decoded as before: every key, the explicit ones over the merged ones.
	var env struct {
		Servers []serverEntry `yaml:"servers"`
	}
	servers := root.Content[1]
	servers.Content = servers.Content[1:]
	if err := root.Decode(&env); err != nil {
		t.Fatal(err)
	}
	got := env.Servers[0].Env
	if len(got) != n+1 || got["K0"] != "v0" || got["K2999"] != "v2999" || got["K7"] != "v7" || got["M1"] != "merged" {
		t.Errorf("decoded %d keys (K0=%q K2999=%q K7=%q M1=%q), want %d with K7=v7 and M1=merged",
			len(got), got["K0"], got["K2999"], got["K7"], got["M1"], n+1)
	}
}

// descriptionOf returns the description: node of the first server of root.
func descriptionOf(root *yaml.Node) *yaml.Node {
	s := root.Content[1].Content[0]
	for i := 0; i+1 < len(s.Content); i += 2 {
		if s.Content[i].Value == "description" {
			return s.Content[i+1]
		}
	}
	return nil
}
