package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// policyProblemsDoc has several policy problems, each on a line of its own, and one of a server.
const policyProblemsDoc = `servers:
  - name: github
    command: x
    callTimeout: 5x
policy:
  principals:
    alice: {tenant: acme, roles: [support]}
    /carol: {}
    acme/bob:
      roles: [admin]
      tenant: globex
    acme/alice: {roles: [admin]}
  rules:
    - name: r1
      allow:
        - kb__*
        - github
      deny: ['x__']
    - roles: ['adm*']
      users:
        - ok
        - acme/x
      approve: ['[x__y']
`

// policyProblemsWant are the lines the problems of policyProblemsDoc are reported with: each
// with the line of its own entry (the principal's key, its field, the item of a rule's list).
var policyProblemsWant = []string{
	`c.yaml:4: servers[0] (github): field callTimeout: "5x" is not a duration`,
	`c.yaml:8: policy: principal "/carol": want a user name, or tenant/user`,
	`c.yaml:11: policy: principal "acme/bob" has tenant "globex": the key names tenant "acme"`,
	`c.yaml:7: policy: principals "acme/alice" and "alice": user "alice" of tenant "acme" is configured twice`,
	`c.yaml:17: policy: rule 1 (r1): pattern "github" matches no tool`,
	`c.yaml:18: policy: rule 1 (r1): pattern "x__" matches no tool: its server or tool part is empty`,
	`c.yaml:19: policy: rule 2: roles entry "adm*": names are exact`,
	`c.yaml:22: policy: rule 2: users entry "acme/x": users are user names`,
	`c.yaml:23: policy: rule 2: bad pattern "[x__y"`,
}

// TestConfigPolicyProblemsAllWithLines: policy.New stopped at the first problem, so a file with
// several showed one per run; and a principal's problem had the line of the policy section, not
// its own. Every problem is reported, each with the line of its entry.
func TestConfigPolicyProblemsAllWithLines(t *testing.T) {
	_, err := parseConfig("c.yaml", []byte(policyProblemsDoc), lookupTest)
	if err == nil {
		t.Fatal("accepted")
	}
	assertLines(t, err.Error(), policyProblemsWant)
}

// assertLines checks that text has a line starting with each of want, and no other.
func assertLines(t *testing.T, text string, want []string) {
	t.Helper()
	got := strings.Split(text, "\n")
	for _, w := range want {
		found := false
		for _, line := range got {
			found = found || strings.HasPrefix(line, w)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", w, text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d lines, want %d:\n%s", len(got), len(want), text)
	}
}

// TestConfigPolicyProblemsBounded: a policy of many problems reports the first
// policy.MaxProblems, then how many more, at the line of the policy section.
func TestConfigPolicyProblemsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("servers:\n  - {name: a, command: x}\npolicy:\n  rules:\n    - name: many\n      allow:\n")
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&b, "        - s%d\n", i)
	}
	_, err := parseConfig("c.yaml", []byte(b.String()), lookupTest)
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || !strings.HasPrefix(lines[0], `c.yaml:7: policy: rule 1 (many): pattern "s0" matches no tool`) ||
		!strings.HasPrefix(lines[19], `c.yaml:26: policy: rule 1 (many): pattern "s19" matches no tool`) ||
		lines[20] != "c.yaml:3: policy: and 5 more problems" {
		t.Errorf("error:\n%s", err)
	}
}

// TestUpAndPolicyDigestShowEveryPolicyProblem: the commands that load a configuration (up, and
// policy digest, which checks one) show every problem with its line.
func TestUpAndPolicyDigestShowEveryPolicyProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(policyProblemsDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(policyProblemsWant))
	for i, w := range policyProblemsWant {
		want[i] = strings.Replace(w, "c.yaml", path, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "up", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--config", path)
	if err == nil {
		t.Fatal("up accepted the configuration")
	}
	assertLines(t, err.Error(), want)
	_, _, err = runCmd(t, ctx, "policy", "digest", "--config", path)
	if err == nil {
		t.Fatal("policy digest accepted the configuration")
	}
	assertLines(t, err.Error(), want)
}

// TestConfigPolicyProblemLinesMerged: a rule whose name a merge (<<) brings in, and a principal
// a merge brings in, still get the line of their entry: the pattern's, the merged key's.
func TestConfigPolicyProblemLinesMerged(t *testing.T) {
	const doc = `servers:
  - {name: a, command: x}
policy:
  principals:
    <<: {/x: {}}
    bob: {}
  rules:
    - <<: {name: merged}
      allow:
        - ok__*
        - bad
`
	_, err := parseConfig("c.yaml", []byte(doc), lookupTest)
	if err == nil {
		t.Fatal("accepted")
	}
	assertLines(t, err.Error(), []string{
		`c.yaml:5: policy: principal "/x": want a user name, or tenant/user`,
		`c.yaml:11: policy: rule 1 (merged): pattern "bad" matches no tool`,
	})
}

// TestConfigPolicyProblemsQuoteBounded: one pattern of a megabyte, repeated by alias (three
// bytes each), was quoted in full, three times over, by each of the problems reported: the
// error of a 1 MiB file was tens of megabytes. What a problem quotes is cut.
func TestConfigPolicyProblemsQuoteBounded(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "servers:\n  - {name: a, command: x}\npolicy:\n  rules:\n    - name: big\n      deny: [&p %s]\n      allow: [", strings.Repeat("x", 1<<20))
	for i := 0; i < 100; i++ {
		b.WriteString("*p, ")
	}
	b.WriteString("ok__*]\n")
	_, err := parseConfig("c.yaml", []byte(b.String()), lookupTest)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	lines := strings.Split(msg, "\n")
	if len(lines) != 21 || !strings.HasPrefix(lines[0], `c.yaml:7: policy: rule 1 (big): pattern "xxx`) ||
		!strings.Contains(lines[0], `x…" matches no tool`) || lines[20] != "c.yaml:3: policy: and 81 more problems" {
		t.Errorf("error:\n%.2000s", msg)
	}
	if len(msg) > 64<<10 {
		t.Errorf("error of %d bytes for %d problems", len(msg), len(lines))
	}
}
