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

// TestConfigOutOfRangeOnlyForNumbers: "out of range" was said of any value of a number field
// that strconv.ParseFloat reads, so a quoted "5" (a string in YAML, refused as one) was "out of
// range", and so were the words nan and inf (YAML writes those .nan and .inf). Only a number
// too large for its field is out of range.
func TestConfigOutOfRangeOnlyForNumbers(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"servers: []\nlimits: {tenant: {burst: \"5\"}}\n":       "c.yaml:2: limits.tenant: field burst: want a whole number, got `5`",
		"servers: []\nlimits: {tenant: {burst: '5'}}\n":         "c.yaml:2: limits.tenant: field burst: want a whole number, got `5`",
		"servers: []\nlimits: {tenant: {burst: !!str 5}}\n":     "c.yaml:2: limits.tenant: field burst: want a whole number, got `5`",
		"servers: []\nlimits: {tenant: {perSecond: \"1.5\"}}\n": "c.yaml:2: limits.tenant: field perSecond: want a number, got `1.5`",
		"servers: []\nlimits: {tenant: {burst: nan}}\n":         "c.yaml:2: limits.tenant: field burst: want a whole number, got `nan`",
		"servers: []\nlimits: {tenant: {perSecond: inf}}\n":     "c.yaml:2: limits.tenant: field perSecond: want a number, got `inf`",
		"servers: []\nlimits: {tenant: {perSecond: -1e400}}\n":  "c.yaml:2: limits.tenant: field perSecond: want a number, got `-1e400`: out of range",
		"servers: []\nlimits: {tenant: {burst: 1e30}}\n":        "c.yaml:2: limits.tenant: field burst: want a whole number, got `1e30`: out of range",
		"servers: []\nlimits: {tenant: {burst: \"1e400\"}}\n":   "c.yaml:2: limits.tenant: field burst: want a whole number, got `1e400`",
	})
}

// TestConfigTagMismatchValueCut: a value whose explicit tag it does not fit (!!int on a word)
// fails as yaml parses the file, with the value quoted whole ("cannot decode !!str `…` as a
// !!int"): a header's or env's secret, or a megabyte, in the error. It is cut as yaml's type
// errors cut a value, to 7 bytes and "...".
func TestConfigTagMismatchValueCut(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"servers: [{name: a, command: x, headers: {A: !!int Bearer-supersecret}}]\n": "c.yaml: cannot decode !!str `Bearer-...` as a !!int",
		"servers: [{name: a, command: x, env: {A: !!float tok-1234567}}]\n":          "c.yaml: cannot decode !!str `tok-123...` as a !!float",
		"servers: [{name: a, command: x, env: {A: !!int short}}]\n":                  "c.yaml: cannot decode !!str `short` as a !!int",
	})
}

// TestConfigLocalTagInUserWords: a value with a local tag (!foo) kept yaml's message, which
// names the Go type ("cannot unmarshal !foo “ into main.limitsConfig"), and a number with one
// was "out of range".
func TestConfigLocalTagInUserWords(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"servers: []\nlimits: !foo [a]\n":                  "c.yaml:2: field limits: want a mapping, got a list",
		"servers: !foo x\n":                                "c.yaml:1: field servers: want a list of mappings, got `x`",
		"servers: []\nlimits: {tenant: {burst: !foo 5}}\n": "c.yaml:2: limits.tenant: field burst: want a whole number, got `5`",
	})
}

// wantConfigErrors checks that each configuration (file c.yaml) is refused with exactly its
// error.
func wantConfigErrors(t *testing.T, cases map[string]string) {
	t.Helper()
	for yml, want := range cases {
		_, err := parseConfig("c.yaml", []byte(yml), noEnv)
		if err == nil {
			t.Errorf("%q: accepted", yml)
			continue
		}
		if got := err.Error(); got != want {
			t.Errorf("%q:\n got %s\nwant %s", yml, got, want)
		}
	}
}
