package main

import (
	"strings"
	"testing"
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
		`c.yaml:19: policy: rule 2 (r2): pattern "github" matches no tool`,
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
