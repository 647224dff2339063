package main

import (
	"strings"
	"testing"
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
