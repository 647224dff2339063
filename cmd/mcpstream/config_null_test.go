package main

import (
	"errors"
	"strings"
	"testing"
)

// TestConfigNullValuesRefused: a null value (a key with nothing after it, ~ or null) decoded
// without a word to an empty one, or was left out: a limits.servers entry left null lifted the
// "*" limit for that server, a null item of args was dropped (the later args moved up one), a null
// item of kinds left no kind (all three), a null server or rule vanished, a null env or header
// value became "". Each is refused, naming the key and its line.
func TestConfigNullValuesRefused(t *testing.T) {
	const srv = "servers:\n  - {name: github, command: x}\n"
	for name, c := range map[string]struct{ doc, want string }{
		"limits server entry": {srv + "limits:\n  servers:\n    \"*\": {concurrency: 2}\n    github:\n",
			"c.yaml:6: limits: field servers.github: null"},
		"limits server entry ~": {srv + "limits: {servers: {github: ~}}\n", "c.yaml:3: limits: field servers.github: null"},
		"limits tool entry":     {srv + "limits: {tools: {'github__*': null}}\n", "c.yaml:3: limits: field tools.github__*: null"},
		"limits tenant":         {srv + "limits:\n  tenant:\n", "c.yaml:4: limits: field tenant: null"},
		"limits section":        {srv + "limits:\n", "c.yaml:3: limits: null"},
		"rate field":            {srv + "limits:\n  tenant: {perSecond: 5, concurrency: ~}\n", "c.yaml:4: limits.tenant: field concurrency: null"},
		"server item":           {"servers: [~]\n", "c.yaml:1: field servers[0]: a null item, which yaml leaves out"},
		"servers":               {"servers:\n", "c.yaml:1: servers: null"},
		"server field":          {"servers:\n  - {name: github, command: x, description: ~}\n", "c.yaml:2: servers[0] (github): field description: null"},
		"arg item":              {"servers:\n  - {name: github, command: x, args: [a, ~, b]}\n", "c.yaml:2: servers[0] (github): field args[1]: a null item, which yaml leaves out"},
		"kinds item":            {"servers:\n  - {name: github, command: x, kinds: [~]}\n", "c.yaml:2: servers[0] (github): field kinds[0]: a null item"},
		"env value":             {"servers:\n  - name: github\n    command: x\n    env:\n      API_KEY:\n", "c.yaml:5: servers[0] (github): field env.API_KEY: null"},
		"header value":          {"servers:\n  - {name: github, url: 'http://h', headers: {Authorization: ~}}\n", "c.yaml:2: servers[0] (github): field headers.Authorization: null"},
		"policy rules":          {srv + "policy:\n  rules:\n", "c.yaml:4: policy: field rules: null"},
		"policy rule item":      {srv + "policy:\n  rules: [~]\n", "c.yaml:4: policy: field rules[0]: a null item"},
		"deny item":             {srv + "policy:\n  rules:\n    - {name: r, allow: ['*'], deny: [~]}\n", "c.yaml:5: policy.rules[0] (r): field deny[0]: a null item"},
		"principal":             {srv + "policy:\n  principals: {alice: ~}\n  rules: []\n", "c.yaml:4: policy: field principals.alice: null"},
		"search embeddings":     {srv + "search: {embeddings: ~}\n", "c.yaml:3: search: field embeddings: null"},
		"streams":               {srv + "streams: ~\n", "c.yaml:3: streams: null"},
		"embeddedNats field":    {srv + "embeddedNats: {sync: ~}\n", "c.yaml:3: embeddedNats: field sync: null"},
		"alias of a null":       {"servers:\n  - {name: github, command: x, args: [&n ~]}\nlimits: {servers: {github: *n}}\n", "c.yaml:3: limits: field servers.github: null"},
		"merge of a null":       {"servers:\n  - {<<: ~, name: a, command: x}\n", "c.yaml:2: servers[0] (a): field <<: a merge (<<) of a null"},
		"merge of a null item":  {srv + "limits:\n  servers: {<<: [{a: {}}, ~]}\n", "c.yaml:4: limits.servers: field <<: a merge (<<) of a null"},
		"merged null":           {srv + "limits:\n  servers:\n    <<: {github: ~}\n", "c.yaml:5: limits: field servers.github: null"},
	} {
		_, err := parseConfig("c.yaml", []byte(c.doc), lookupTest)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q; want one containing %q", name, err, c.want)
		}
	}
	// Empty values written as such are accepted.
	for _, doc := range []string{
		srv + "limits: {servers: {github: {}}}\n",
		"servers:\n  - {name: github, command: x, args: [], env: {A: ''}, description: ''}\n",
		"servers:\n  - {name: github, command: x, args: ['~', 'null']}\n",
		srv + "policy: {rules: []}\n",
	} {
		if _, err := parseConfig("c.yaml", []byte(doc), lookupTest); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}
