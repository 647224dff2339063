package main

import (
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigValueErrorsNameTheirLine: the problems found once the file decoded (a bad
// duration, a negative rate, an unset variable, a bad pattern) named their key but not its
// line, which the parser knows; and the limits section's problems were one message, its line
// breaks shown as \x0a. Each is reported on its own line, with the line of its key.
func TestConfigValueErrorsNameTheirLine(t *testing.T) {
	const doc = `servers:
  - name: github
    command: x
    callTimeout: 5x
    env:
      TOKEN: ${NOT_SET_ANYWHERE}
  - name: files
    transport: http
    url: ftp://h
limits:
  tenant: {perSecond: -1}
  servers:
    github: {burst: 3}
  tools:
    github: {perSecond: 1}
policy:
  rules:
    - {name: r, allow: ['a__*']}
    - name: r2
      allow: ['github']
streams:
  auditMaxAge: 1s
search:
  embeddings:
    url: https://h/v1
    model: m
    timeout: -1s
embeddedNats:
  sync: 1ms
`
	_, err := parseConfig("c.yaml", []byte(doc), lookupTest)
	if err == nil {
		t.Fatal("accepted")
	}
	got := strings.Split(err.Error(), "\n")
	for _, want := range []string{
		`c.yaml:4: servers[0] (github): field callTimeout: "5x" is not a duration`,
		`c.yaml:6: servers[0] (github): field env.TOKEN: environment variable NOT_SET_ANYWHERE is not set`,
		`c.yaml:9: servers[1] (files): field url: not an absolute http:// or https:// URL`,
		`c.yaml:11: limits: field tenant: perSecond, burst and concurrency must not be negative`,
		`c.yaml:13: limits: field servers.github: burst needs perSecond`,
		`c.yaml:15: limits: field tools.github: "github" matches no tool`,
		`c.yaml:20: policy: rule 2 (r2): pattern "github" matches no tool`, // the line of the pattern, not of its rule
		`c.yaml:22: streams: field auditMaxAge: want a duration of at least 1m`,
		`c.yaml:27: search.embeddings: field timeout: want a positive duration`,
		`c.yaml:29: embeddedNats: field sync: want "always" or a duration`,
	} {
		found := false
		for _, line := range got {
			found = found || strings.HasPrefix(line, want)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), `\x0a`) {
		t.Errorf("a line break shown escaped:\n%s", err)
	}

	// A server written as an alias of another: the alias's line.
	_, err = parseConfig("c.yaml", []byte("servers:\n  - &s {name: a, command: x, callTimeout: bad}\n  - *s\n"), lookupTest)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3: servers[1] (a): field name: duplicate") ||
		!strings.Contains(err.Error(), "c.yaml:3: servers[1] (a): field callTimeout") {
		t.Errorf("alias of a server: %v; want its problems at line 3", err)
	}

	// A server whose connector refuses it (registrysync.Validate): the line of the server.
	_, err = parseConfig("c.yaml", []byte("servers:\n  - {name: a, command: x}\n  - name: b\n    command: ${EMPTY_FOR_TEST}\n"), func(n string) (string, bool) { return "", n == "EMPTY_FOR_TEST" })
	if err == nil || !strings.HasPrefix(err.Error(), "c.yaml:3: servers[1] (b): ") {
		t.Errorf("server refused by its connector: %v; want it at line 3", err)
	}
}

// TestConfigOwnKeyLineWinsOverMerged: a key of a mapping wins over the same key a merge (<<)
// brings in, but the line recorded for it was the first one walked: with the merge written
// first, a problem of the mapping's own value was reported at the merged key's line.
func TestConfigOwnKeyLineWinsOverMerged(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"server field": {"servers:\n  - <<:\n      command: x\n      callTimeout: 1s\n    name: a\n    callTimeout: 5x\n",
			`c.yaml:6: servers[0] (a): field callTimeout: "5x" is not a duration`},
		"limits entry": {"servers:\n  - {name: a, command: x}\nlimits:\n  servers:\n    <<: {a: {perSecond: 1}}\n    a: {burst: 2}\n",
			"c.yaml:6: limits: field servers.a: burst needs perSecond"},
		// Of two merges, the earlier one's key wins, and its line is given.
		"merge list": {"servers:\n  - <<:\n      - {command: x, callTimeout: 5x}\n      - {callTimeout: 1s}\n    name: a\n",
			`c.yaml:3: servers[0] (a): field callTimeout: "5x" is not a duration`},
	} {
		_, err := parseConfig("c.yaml", []byte(c.doc), lookupTest)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
}

// TestConfigItemNameShownBounded: the place of every node of a list item holds the item's name,
// and each node's line was recorded under its place, its name taken out by a regexp: a 64 KiB
// name over 10,000 args (an 85 KB file) took 80 s of CPU before anything was reported. A name
// is shown cut to what a valid one may hold (64 bytes: longer ones are refused).
func TestConfigItemNameShownBounded(t *testing.T) {
	long := strings.Repeat("n", 64<<10)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("{name: "+long+"}"), &doc); err != nil {
		t.Fatal(err)
	}
	if got := nameOf(doc.Content[0]); len(got) > 80 || !strings.HasPrefix(got, " (nnnn") {
		t.Errorf("nameOf of a %d-byte name: %d bytes (%.20q...)", len(long), len(got), got)
	}
	// Still refused, in full.
	_, err := parseConfig("c.yaml", []byte("servers: [{name: "+long+", command: x, args: [a, b]}]"), lookupTest)
	if err == nil || !strings.Contains(err.Error(), "field name: longer than 64 bytes") {
		t.Errorf("a long name: %.200v", err)
	}
}

// TestDropItemNamesAsRegexp: dropItemNames does what the regexp it replaced did.
func TestDropItemNamesAsRegexp(t *testing.T) {
	re := regexp.MustCompile(`(\[\d+\]) \([^)]*\)`)
	for _, s := range []string{
		"", "servers[0]", "servers[0] (a)", "servers[0] (a)b)", "servers[0] (a (b))", "servers[12] (x): env",
		"policy.rules[3] (r): deny[1]", "a] (b)", "x[] (b)", "x[a1] (b)", "[1] ([2] (x)", "servers[0] (no end",
		"servers[0] (a) [1] (b)", "servers[0] (x] (y)z)", "a] (b [1] (c)", "[0] (", "args[1]", "env.K] (v)",
	} {
		if got, want := dropItemNames(s), re.ReplaceAllString(s, "$1"); got != want {
			t.Errorf("dropItemNames(%q) = %q, want %q", s, got, want)
		}
	}
}
