package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

func noEnv(string) (string, bool) { return "", false }

// aliasBomb is a configuration whose n aliases each repeat a server holding n args: n+1
// servers of n args, written in about 6n bytes.
func aliasBomb(n int, extra string) []byte {
	return []byte("servers: [&m {name: a, command: b" + extra + ", args: [" + strings.Repeat("s,", n) + "s]}" +
		strings.Repeat(", *m", n) + "]\n")
}

// TestConfigAliasesWalkedOnce: the unknown-field check walked an alias's node again at each use,
// so a file of n aliases of a node of n items took n² steps: a 4 MiB file, about 10¹¹ (hours of
// CPU before any error). A node is checked once, whatever refers to it.
func TestConfigAliasesWalkedOnce(t *testing.T) {
	const n = 300
	var doc yaml.Node
	if err := yaml.Unmarshal(aliasBomb(n, ""), &doc); err != nil {
		t.Fatal(err)
	}
	w := &shapeWalker{file: "c.yaml", where: map[int]string{}}
	w.walk(doc.Content[0], reflect.TypeFor[fileConfig](), "")
	if w.steps > 4*n {
		t.Errorf("%d steps for a document of about %d nodes", w.steps, 2*n)
	}
}

// TestConfigErrorsBounded: an unknown field under an anchor was reported once per alias (and
// yaml allows hundreds of thousands of aliases in a small file): megabytes of one message. The
// same problem is reported once, and at most maxConfigErrors problems are listed.
func TestConfigErrorsBounded(t *testing.T) {
	_, err := parseConfig("c.yaml", aliasBomb(2000, ", bogus: 1"), noEnv)
	if err == nil {
		t.Fatal("accepted an unknown field")
	}
	if got := strings.Count(err.Error(), "field bogus: unknown field"); got != 1 {
		t.Errorf("unknown field reported %d times, want once", got)
	}

	// Many different problems: the first maxConfigErrors, then how many more.
	var b bytes.Buffer
	b.WriteString("servers:\n")
	for range 500 {
		b.WriteString("  - {name: a, command: x}\n")
	}
	_, err = parseConfig("c.yaml", b.Bytes(), noEnv)
	if err == nil {
		t.Fatal("accepted duplicate names")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxConfigErrors+1 || !strings.Contains(lines[len(lines)-1], "and 449 more problems") {
		t.Errorf("%d lines, last %q: want %d problems then \"and 449 more problems\"", len(lines), lines[len(lines)-1], maxConfigErrors)
	}
}

// TestConfigMergeKeysChecked: the keys a merge (<<) brings in were not checked, so a misspelt
// field in a merged mapping was silently ignored (a deny: spelt dney: denies nothing).
func TestConfigMergeKeysChecked(t *testing.T) {
	for name, y := range map[string]string{
		"server":        "servers:\n  - <<: {name: a, command: x, comand: y}\n",
		"merge list":    "servers:\n  - <<: [{name: a}, {command: x, argz: [y]}]\n",
		"policy rule":   "servers: []\npolicy:\n  rules:\n    - {name: r, <<: {allow: ['a__*'], dney: ['a__b']}}\n",
		"anchor merged": "servers: []\npolicy:\n  principals:\n    p: &p {tenant: t, dney: x}\n  rules:\n    - {name: r, <<: *p}\n",
	} {
		_, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v: want an unknown field", name, err)
		}
	}
	// A merge of known fields still works.
	cfg, err := parseConfig("c.yaml", []byte("servers:\n  - &a {name: a, command: x, args: [1]}\n  - <<: *a\n    name: b\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ServerConfigs(); len(got) != 2 || got[1].Name != "b" || got[1].Command != "x" {
		t.Errorf("merged servers: %+v", got)
	}
}

// TestConfigFractionalIntegers: yaml truncates a float into an int field, so concurrency: 0.5
// became 0, no limit at all, and dimensions: 0.5 no dimensions, silently. Refused with the place.
func TestConfigFractionalIntegers(t *testing.T) {
	for field, y := range map[string]string{
		"concurrency": "servers: []\nlimits:\n  tenant: {perSecond: 1, concurrency: 0.5}\n",
		"burst":       "servers: []\nlimits:\n  servers:\n    a: {perSecond: 1, burst: 2.5}\n",
		"dimensions":  "servers: []\nsearch:\n  embeddings: {url: 'http://127.0.0.1:1/v1', model: m, dimensions: 0.5}\n",
	} {
		_, err := parseConfig("c.yaml", []byte(y), noEnv)
		if err == nil || !strings.Contains(err.Error(), "field "+field+": ") || !strings.Contains(err.Error(), "whole number") {
			t.Errorf("%s: %v: want the field refused for not being a whole number", field, err)
		}
	}
	// Whole numbers written as floats are fine.
	cfg, err := parseConfig("c.yaml", []byte("servers: []\nlimits:\n  tenant: {perSecond: 1.5, burst: 3.0, concurrency: 1e1}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Limits.Tenant; r.Burst != 3 || r.Concurrency != 10 {
		t.Errorf("tenant limit %+v", r)
	}
}

// TestConfigHeaderAndArgumentBytes: header names that are not HTTP tokens, header values with
// control characters and NUL bytes in a command, its args or env were accepted, and failed
// only when the connector sent the request or started the process, again and again.
func TestConfigHeaderAndArgumentBytes(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "NUL_SECRET" {
			return "s3cret\x00value", true
		}
		return "", false
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"header name":     {"servers: [{name: a, url: 'http://x', headers: {\"X-\\u00e9\": v}}]\n", `field headers: "X-é" is not a header name`},
		"header name (,)": {"servers: [{name: a, url: 'http://x', headers: {'a,b': v}}]\n", `field headers: "a,b" is not a header name`},
		"header NUL":      {"servers: [{name: a, url: 'http://x', headers: {X-A: \"a\\0b\"}}]\n", "field headers.X-A: value holds a control character"},
		"header DEL":      {"servers: [{name: a, url: 'http://x', headers: {X-A: \"a\\x7fb\"}}]\n", "field headers.X-A: value holds a control character"},
		"header secret":   {"servers: [{name: a, url: 'http://x', headers: {Authorization: '${NUL_SECRET}'}}]\n", "field headers.Authorization: value holds a control character"},
		"command":         {"servers: [{name: a, command: \"x\\0y\"}]\n", "field command: holds a NUL byte"},
		"args":            {"servers: [{name: a, command: x, args: [ok, \"\\0\"]}]\n", "field args[1]: holds a NUL byte"},
		"env":             {"servers: [{name: a, command: x, env: {A: '${NUL_SECRET}'}}]\n", "field env.A: holds a NUL byte"},
	} {
		_, err := parseConfig("c.yaml", []byte(tc.yaml), lookup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v: want %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v shows the secret", name, err)
		}
	}
	// A tab in a header value is allowed (RFC 9110 field content).
	if _, err := parseConfig("c.yaml", []byte("servers: [{name: a, url: 'http://x', headers: {X-A: \"a\\tb\"}}]\n"), lookup); err != nil {
		t.Errorf("tab in a header value: %v", err)
	}
}

// TestConfigErrorsPrintable: names, unknown keys and values were written into the messages as
// they were, so a name holding ESC sequences (or a NUL, or bytes that are not UTF-8) rewrote the
// operator's terminal when the error was printed. Such bytes are shown escaped.
func TestConfigErrorsPrintable(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"name ESC":         {"servers: [{name: \"a\\e[2Jb\", command: x}]\n", `servers[0] (a\x1b[2Jb): field name: must not hold spaces or control characters`},
		"name NUL":         {"servers: [{name: \"a\\0b\", command: x}]\n", `servers[0] (a\x00b): field name`},
		"unknown key":      {"servers: [{name: a, command: x, \"co\\emmand\": y}]\n", `field co\x1bmmand: unknown field`},
		"bidi override":    {"servers: [{name: \"a\\u202eb\", command: x, bogus: 1}]\n", `servers[0] (a\u202eb): field bogus`},
		"value in message": {"servers: [{name: a, transport: \"st\\edio\", command: x}]\n", `field transport: "st\x1bdio" is not one of`},
		"limits key":       {"servers: []\nlimits: {servers: {\"a\\rb\": {perSecond: -1}}}\n", `limits: field servers.a\x0db`},
	} {
		_, err := parseConfig("c.yaml", []byte(tc.yaml), noEnv)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q: want %q", name, msg, tc.want)
		}
		for _, line := range strings.Split(msg, "\n") {
			if i := strings.IndexFunc(line, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
				t.Errorf("%s: %q holds %q", name, line, line[i:])
			}
		}
	}
	// Ordinary names are shown as they are, non-ASCII letters included.
	_, err := parseConfig("c.yaml", []byte("servers: [{name: \"café-é\", command: x, bogus: 1}]\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "servers[0] (café-é): field bogus") {
		t.Errorf("%v", err)
	}
}

// TestConfigTypeErrorsNameTheirField: a value of the wrong type was reported with the place of
// the last key on its line, so in a flow mapping ({perSecond: x, burst: y, concurrency: 1}) every
// error named concurrency. Each names its own field.
func TestConfigTypeErrorsNameTheirField(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"limits": {"servers: []\nlimits: {tenant: {perSecond: 1e400, burst: 99999999999999999999, concurrency: 1}}\n", []string{
			"c.yaml:2: limits.tenant: field perSecond: want a number, got `1e400`: out of range",
			"c.yaml:2: limits.tenant: field burst: want a whole number, got `9999999...`: out of range",
		}},
		"server": {"servers: [{name: a, command: [x], args: y, kinds: tools}]\n", []string{
			"c.yaml:1: servers[0] (a): field command: want a string, got a list",
			"c.yaml:1: servers[0] (a): field args: want a list of strings, got `y`",
			"c.yaml:1: servers[0] (a): field kinds: want a list of strings, got `tools`",
		}},
		"policy": {"servers: []\npolicy: {approveDestructive: maybe, rules: [{name: r, allow: {a: b}}]}\n", []string{
			"c.yaml:2: policy: field approveDestructive: want true or false, got `maybe`",
			"c.yaml:2: policy.rules[0] (r): field allow: want a list of strings, got a mapping",
		}},
	} {
		_, err := parseConfig("c.yaml", []byte(tc.yaml), noEnv)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		got := strings.Split(err.Error(), "\n")
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", name, got, tc.want)
		}
	}
}
