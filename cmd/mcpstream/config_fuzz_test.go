package main

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseConfig parses arbitrary configuration files: none may panic; every error wraps
// ErrConfig, lists at most maxConfigErrors problems (plus the count of the rest) and never
// shows the value of a ${ENV} reference nor an unprintable character.
func FuzzParseConfig(f *testing.F) {
	f.Add(validConfig)
	f.Add("servers: [&m {name: a, command: b, bogus: 1, args: &a [s, s]}, *m, *m]\n")
	f.Add("servers:\n  - <<: [{name: a}, {command: x, argz: [y]}]\npolicy: *none\n")
	f.Add("servers: []\nlimits:\n  tenant: {perSecond: .nan, burst: 2.5, concurrency: 1e1}\n")
	f.Add("servers: [{name: a, url: 'http://${GITHUB_TOKEN}', headers: {\"X-\\u00e9\": \"a\\0b\"}}]\n")
	f.Add("servers: []\nsearch: {embeddings: {url: 'http://x/${DB_PASSWORD}', model: m, dimensions: 0.5, timeout: -1s}}\n")
	f.Add("servers: []\nstreams: {resultsMaxAge: 1e400h, resultsMaxBytes: 1e3MiB, auditMaxBytes: -1GiB}\n")
	f.Add("a: &a [*a]\nservers: &s [*s]\n---\n")
	f.Add("servers: []\nembeddedNats: {sync: 9223372036854775807ns, maxStore: 1e400GiB, maxMemory: ${DB_PASSWORD}}\n")
	f.Add("servers: [{name: \"a\\e[2J\\u202e\", command: [x], args: y, \"k\\0\": 1}]\nlimits: {tenant: {perSecond: 1e400, burst: 1e30}}\n")
	f.Add("servers: []\npolicy: {approveDestructive: maybe, rules: [{name: r, allow: {a: b}, <<: {deny: 1}}]}\n")
	f.Add("servers: [{name: \xff\xfe, command: x}]\n")
	f.Fuzz(func(t *testing.T, y string) {
		_, err := parseConfig("c.yaml", []byte(y), lookupTest)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("%v does not wrap ErrConfig", err)
		}
		msg := err.Error()
		if n := strings.Count(msg, "\n") + 1; n > maxConfigErrors+1 {
			t.Fatalf("%d problems listed", n)
		}
		for _, line := range strings.Split(msg, "\n") {
			if i := strings.IndexFunc(line, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
				t.Fatalf("%q holds %q", line, line[i:])
			}
		}
		for _, v := range testEnv {
			if len(v) >= 8 && strings.Contains(msg, v) && !strings.Contains(y, v) {
				t.Fatalf("%v shows the value of a reference", err)
			}
		}
	})
}
