package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestLimitsNotFinite: YAML has .nan and .inf floats. perSecond: .nan passed every check (NaN is
// neither negative nor zero) and became a window of whatever a NaN Duration converts to;
// perSecond: .inf a burst of whatever +Inf converts to, per platform. Both are refused.
func TestLimitsNotFinite(t *testing.T) {
	for name, y := range map[string]string{
		"nan":      "servers: []\nlimits:\n  tenant: {perSecond: .nan}\n",
		"inf":      "servers: []\nlimits:\n  servers:\n    a: {perSecond: .inf, burst: 2}\n",
		"tool inf": "servers: []\nlimits:\n  tools:\n    \"a__*\": {perSecond: .Inf}\n",
	} {
		_, err := parseConfig("c.yaml", []byte(y), func(string) (string, bool) { return "", false })
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "c.yaml") || !strings.Contains(err.Error(), "perSecond") {
			t.Errorf("%s: %v: want the file and the field named", name, err)
		}
	}
}

// TestLimitsToolPatternWithoutServer: a tools pattern is server__tool; one without "__" and
// without a glob character ("github", meant as every tool of github) is compared with the whole
// public name server__tool, which always holds "__": it never matched, and the limit it gave
// silently applied to nothing.
func TestLimitsToolPatternWithoutServer(t *testing.T) {
	y := "servers: []\nlimits:\n  tools:\n    github: {perSecond: 1}\n    \"kb__*\": {perSecond: 2}\n    \"*search*\": {perSecond: 3}\n"
	_, err := parseConfig("c.yaml", []byte(y), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("accepted a tools pattern that matches no tool")
	}
	if msg := err.Error(); !strings.Contains(msg, "c.yaml") || !strings.Contains(msg, `"github"`) || !strings.Contains(msg, "github__*") ||
		strings.Contains(msg, "kb__*") || strings.Contains(msg, "*search*") {
		t.Errorf("%v: want only github named, with the pattern meant", err)
	}
}

// TestLimitsUnknownServers: a limit naming no server of the configuration (a typo: githib for
// github) applied to nothing, silently. It is kept — a server of that name may register from
// another registrysync's configuration — and the executor role warns about it.
func TestLimitsUnknownServers(t *testing.T) {
	l := &limitsConfig{
		Servers: map[string]rateConfig{"*": {PerSecond: 1}, "github": {PerSecond: 1}, "githib": {PerSecond: 1}},
		Tools: map[string]rateConfig{"github__create*": {PerSecond: 1}, "git*__x": {PerSecond: 1}, "gitlab__x": {PerSecond: 1},
			"*search*": {PerSecond: 1}, "files___rm*": {PerSecond: 1}},
	}
	got := l.unknownServers([]string{"github", "files_"})
	want := []string{"limits.servers.githib", "limits.tools.gitlab__x"}
	if !slices.Equal(got, want) {
		t.Errorf("unknown = %q, want %q", got, want)
	}
	if got := l.unknownServers(nil); got != nil {
		t.Errorf("a configuration without servers (an executor-only one) warns of %q", got)
	}

	y := "servers:\n  - {name: github, transport: http, url: 'http://127.0.0.1:9/mcp'}\nlimits:\n  servers:\n    githib: {perSecond: 5}\n"
	p := startExecutorRole(t, natstest.Start(t), y)
	waitFor(t, "the executor's warning", 600, func() bool {
		out := p.errOut.String()
		return strings.Contains(out, "limits that name no server") && strings.Contains(out, "limits.servers.githib")
	})
}
