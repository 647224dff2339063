package main

import (
	"strings"
	"testing"
)

// TestConfigTypeErrorsInUserWords: a value of the wrong shape was reported in yaml's and Go's
// words, "cannot unmarshal !!map into []main.serverEntry", naming the program's own types
// (main.limitsConfig, policy.Config, map[string]policy.PrincipalConfig) to someone who only
// wrote a YAML file. Each now says what the field wants and what it got.
func TestConfigTypeErrorsInUserWords(t *testing.T) {
	for yml, want := range map[string]string{
		"servers: 5\n":                                       "c.yaml:1: field servers: want a list of mappings, got `5`",
		"servers: {a: 1}\n":                                  "c.yaml:1: field servers: want a list of mappings, got a mapping",
		"servers: [5]\n":                                     "c.yaml:1: field servers[0]: want a mapping, got `5`",
		"servers: []\npolicy: 5\n":                           "c.yaml:2: field policy: want a mapping, got `5`",
		"servers: []\nlimits: []\n":                          "c.yaml:2: field limits: want a mapping, got a list",
		"servers: []\nlimits: {servers: [a]}\n":              "c.yaml:2: limits: field servers: want a mapping, got a list",
		"servers: []\npolicy: {principals: [alice]}\n":       "c.yaml:2: policy: field principals: want a mapping, got a list",
		"servers: []\nstreams: 5\n":                          "c.yaml:2: field streams: want a mapping, got `5`",
		"servers: []\nsearch: []\n":                          "c.yaml:2: field search: want a mapping, got a list",
		"servers: []\nembeddedNats: x\n":                     "c.yaml:2: field embeddedNats: want a mapping, got `x`",
		"servers: [{name: a, command: x, env: [A=1]}]\n":     "c.yaml:1: servers[0] (a): field env: want a mapping, got a list",
		"servers: [{name: a, command: x, args: y}]\n":        "c.yaml:1: servers[0] (a): field args: want a list of strings, got `y`",
		"servers: [{name: a, command: [x]}]\n":               "c.yaml:1: servers[0] (a): field command: want a string, got a list",
		"servers: []\npolicy: {approveDestructive: maybe}\n": "c.yaml:2: policy: field approveDestructive: want true or false, got `maybe`",
		"servers: []\nlimits: {tenant: {perSecond: fast}}\n": "c.yaml:2: limits.tenant: field perSecond: want a number, got `fast`",
		"servers: []\nlimits: {tenant: {burst: [1]}}\n":      "c.yaml:2: limits.tenant: field burst: want a whole number, got a list",
	} {
		_, err := parseConfig("c.yaml", []byte(yml), noEnv)
		if err == nil {
			t.Errorf("%q: accepted", yml)
			continue
		}
		if got := err.Error(); got != want {
			t.Errorf("%q:\n got %s\nwant %s", yml, got, want)
		}
		if strings.Contains(err.Error(), "main.") || strings.Contains(err.Error(), "policy.") {
			t.Errorf("%q: names a Go type: %s", yml, err)
		}
	}
}
