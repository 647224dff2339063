package main

import (
	"errors"
	"github.com/mcpstream/mcpstream/natsembed"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/registrysync"
)

// testEnv is the environment ${VAR} references resolve from in these tests.
var testEnv = map[string]string{
	"GITHUB_TOKEN": "ghp_s3cr3t-value-123",
	"DB_PASSWORD":  "hunter2-very-secret",
	"HOST":         "tools.example.com",
	"EMPTY":        "",
}

func lookupTest(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

const validConfig = `
servers:
  - name: github
    description: GitHub issues and pull requests
    transport: http
    url: https://${HOST}/mcp
    headers:
      Authorization: Bearer ${GITHUB_TOKEN}
      X-Trace: "on"
    authContext: tenant:acme
    callTimeout: 45s
  - name: db
    transport: stdio
    command: /usr/local/bin/db-mcp
    args: ["--readonly", "--price", "$$5"]
    env:
      DB_PASSWORD: ${DB_PASSWORD}
      MODE: ro${EMPTY}
    kinds: [tools]
    protocolVersion: 2025-11-25
  - name: inferred
    command: ./server
policy:
  principals:
    alice: {tenant: acme, roles: [dev]}
  rules:
    - name: devs
      roles: [dev]
      allow: ["github__*", "db__query*"]
      deny: ["db__drop*"]
      approve: ["github__merge*"]
limits:
  tenant: {perSecond: 50, burst: 100, concurrency: 16}
  servers:
    "*": {perSecond: 20, burst: 40}
  tools:
    "github__create*": {perSecond: 1, burst: 2}
`

func TestLoadConfigValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpstream.yaml")
	if err := os.WriteFile(path, []byte(validConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, lookupTest)
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if cfg.Path != path {
		t.Errorf("Path = %q, want %q", cfg.Path, path)
	}
	got := cfg.ServerConfigs()
	want := []registrysync.ServerConfig{
		{
			Name: "github", Description: "GitHub issues and pull requests", Transport: "http",
			URL:         "https://tools.example.com/mcp",
			Headers:     map[string]string{"Authorization": "Bearer ghp_s3cr3t-value-123", "X-Trace": "on"},
			AuthContext: "tenant:acme", CallTimeout: 45 * time.Second,
			Secrets: []string{"Bearer ghp_s3cr3t-value-123", "ghp_s3cr3t-value-123", "tools.example.com"},
		},
		{
			Name: "db", Transport: "stdio", Command: "/usr/local/bin/db-mcp",
			Args:            []string{"--readonly", "--price", "$5"},
			Env:             map[string]string{"DB_PASSWORD": "hunter2-very-secret", "MODE": "ro"},
			Kinds:           []string{"tools"},
			ProtocolVersion: "2025-11-25",
			Secrets:         []string{"hunter2-very-secret"},
		},
		{Name: "inferred", Transport: "stdio", Command: "./server"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d servers, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("server %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if cfg.Policy == nil || len(cfg.Policy.Rules) != 1 || cfg.Policy.Principals["alice"].Tenant != "acme" {
		t.Errorf("policy not parsed: %+v", cfg.Policy)
	}
	if cfg.Limits == nil || cfg.Limits.Tenant == nil || cfg.Limits.Tenant.Burst != 100 || cfg.Limits.Tools["github__create*"].PerSecond != 1 {
		t.Errorf("limits not parsed: %+v", cfg.Limits)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every line of the error, after "FILE"
	}{
		{
			name: "unknown top-level field",
			yaml: "servers: []\nserver: []\n",
			want: []string{":2: field server: unknown field (known: embeddedNats, limits, policy, search, servers, streams)"},
		},
		{
			name: "unknown server field",
			yaml: "servers:\n  - name: github\n    transport: http\n    urll: https://x/mcp\n",
			want: []string{":4: servers[0] (github): field urll: unknown field (known: args, authContext, callTimeout, command, cwd, description, env, headers, kinds, name, protocolVersion, transport, url)"},
		},
		{
			name: "unknown policy rule field",
			yaml: "servers: []\npolicy:\n  rules:\n    - name: r\n      alow: [x]\n",
			want: []string{":5: policy.rules[0] (r): field alow: unknown field (known: allow, approve, deny, name, roles, tenants, users)"},
		},
		{
			name: "unknown limits field",
			yaml: "servers: []\nlimits:\n  servers:\n    github: {perSecond: 1, brust: 2}\n",
			want: []string{":4: limits.servers.github: field brust: unknown field (known: burst, concurrency, perSecond)"},
		},
		{
			name: "duplicate server names",
			yaml: "servers:\n  - {name: a, command: x}\n  - {name: b, command: y}\n  - {name: a, command: z}\n",
			want: []string{":4: servers[2] (a): field name: duplicate: servers[0] has the same name"},
		},
		{
			name: "server name holding __",
			yaml: "servers:\n  - {name: kb__admin, command: x}\n",
			want: []string{`:2: servers[0] (kb__admin): field name: must not hold "__": it separates the server from the tool in public names and policy patterns`},
		},
		{
			name: "bad transport",
			yaml: "servers:\n  - {name: a, transport: websocket, url: 'https://x'}\n",
			want: []string{`:2: servers[0] (a): field transport: "websocket" is not one of stdio, http, sse`},
		},
		{
			name: "stdio without command",
			yaml: "servers:\n  - {name: a, transport: stdio}\n",
			want: []string{":2: servers[0] (a): field command: required for transport stdio"},
		},
		{
			name: "http without url",
			yaml: "servers:\n  - {name: github, transport: http}\n",
			want: []string{":2: servers[0] (github): field url: required for transport http"},
		},
		{
			name: "sse with command",
			yaml: "servers:\n  - {name: a, transport: sse, url: 'http://127.0.0.1:1/sse', command: x}\n",
			want: []string{":2: servers[0] (a): field command: only for transport stdio"},
		},
		{
			name: "stdio with url and headers",
			yaml: "servers:\n  - {name: a, command: x, transport: stdio, url: 'http://x', headers: {A: b}}\n",
			want: []string{
				":2: servers[0] (a): field url: only for transports http and sse",
				":2: servers[0] (a): field headers: only for transports http and sse",
			},
		},
		{
			name: "no transport, command or url",
			yaml: "servers:\n  - {name: a}\n",
			want: []string{":2: servers[0] (a): field transport: required: stdio (with command) or http or sse (with url)"},
		},
		{
			name: "missing name",
			yaml: "servers:\n  - {command: x}\n",
			want: []string{":2: servers[0]: field name: required"},
		},
		{
			name: "unset env reference",
			yaml: "servers:\n  - name: github\n    url: https://x/mcp\n    headers: {Authorization: 'Bearer ${NOPE_TOKEN}'}\n",
			want: []string{":4: servers[0] (github): field headers.Authorization: environment variable NOPE_TOKEN is not set"},
		},
		{
			name: "bad env reference",
			yaml: "servers:\n  - {name: a, command: 'x', args: ['${1BAD}', '${OPEN']}\n",
			want: []string{
				":2: servers[0] (a): field args[0]: ${1BAD} is not a valid reference (want ${ENV_VAR})",
				":2: servers[0] (a): field args[1]: unterminated ${ reference",
			},
		},
		{
			name: "invalid url never shows the resolved secret",
			yaml: "servers:\n  - {name: a, transport: http, url: 'ftp://${GITHUB_TOKEN}@host/x'}\n",
			want: []string{":2: servers[0] (a): field url: not an absolute http:// or https:// URL"},
		},
		{
			name: "bad call timeout, protocol, auth context, kind",
			yaml: "servers:\n  - {name: a, command: x, callTimeout: soon, protocolVersion: latest, authContext: 'team:x', kinds: [tool]}\n",
			want: []string{
				`:2: servers[0] (a): field callTimeout: "soon" is not a duration such as 30s or 2m`,
				`:2: servers[0] (a): field protocolVersion: "latest" is not an MCP protocol version such as 2025-11-25`,
				`:2: servers[0] (a): field authContext: "team:x" is not tenant:T, user:U or tenant:T/user:U`,
				`:2: servers[0] (a): field kinds: "tool" is not one of tools, prompts, resources`,
			},
		},
		{
			// Both were sent with Header.Set in map order: one or the other, at random.
			name: "header names equal but for case",
			yaml: "servers:\n  - name: a\n    url: https://x/mcp\n    headers: {Authorization: Bearer x, authorization: Bearer y}\n",
			want: []string{`:4: servers[0] (a): field headers.authorization: the same header as Authorization (header names do not depend on case): keep one`},
		},
		{
			// Refused by the connectors' check, which named neither the field nor the versions.
			name: "unknown protocol version",
			yaml: "servers:\n  - {name: a, command: x, protocolVersion: 2099-01-01}\n",
			want: []string{`:2: servers[0] (a): field protocolVersion: "2099-01-01" is not an MCP protocol version mcpstream speaks: 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05`},
		},
		{
			// An alias of a null node decodes to no policy, the open one, as an empty key does.
			name: "policy alias of a null",
			yaml: "servers:\n  - {name: a, command: x, description: &none ~}\npolicy: *none\n",
			want: []string{":3: policy: empty, which would allow everything: remove the key for the open policy " +
				"(one local principal may use every tool), or give principals and rules (policy: {rules: []} denies everything)"},
		},
		{
			name: "bad policy pattern",
			yaml: "servers: []\npolicy:\n  rules:\n    - {name: r, allow: ['[x']}\n",
			want: []string{`:4: policy: rule 1 (r): bad pattern "[x"`},
		},
		{
			// Compared with server__tool, which always holds "__": a deny that silently
			// denied nothing.
			name: "policy pattern without a tool part",
			yaml: "servers: []\npolicy:\n  rules:\n    - {name: r, allow: ['*'], deny: [github]}\n",
			want: []string{`:4: policy: rule 1 (r): pattern "github" matches no tool: patterns are server__tool ("github__*": every tool of server github)`},
		},
		{
			name: "wrong type",
			yaml: "servers:\n  - name: a\n    command: x\n    args: --flag\n",
			want: []string{":4: servers[0] (a): field args: want a list of strings, got `--flag`"},
		},
		{
			name: "yaml syntax",
			yaml: "servers:\n  - name: a\n   command: x\n",
			want: []string{":1: did not find expected '-' indicator"},
		},
		{
			name: "duplicate key",
			yaml: "servers: []\nservers: []\n",
			want: []string{`:2: field servers: mapping key "servers" already defined at line 1`},
		},
		{
			name: "two documents",
			yaml: "servers: []\n---\nservers: []\n",
			want: []string{":2: more than one YAML document"},
		},
		{
			name: "empty",
			yaml: "# nothing\n",
			want: []string{": empty configuration (want at least a servers: list)"},
		},
		{
			name: "not a mapping",
			yaml: "- a\n- b\n",
			want: []string{":1: the document must be a mapping with servers:, policy: and limits:"},
		},
		{
			name: "search embeddings",
			yaml: "servers: []\nsearch:\n  embeddings: {url: 'ftp://x', apiKey: '${NOPE_KEY}', dimensions: -1, timeout: soon}\n",
			want: []string{
				":3: search.embeddings: field url: want an http(s) URL such as https://api.openai.com/v1",
				":3: search.embeddings: field model: required, e.g. text-embedding-3-small",
				":3: search.embeddings: field dimensions: must be between 1 and 16384 (or absent)",
				":3: search.embeddings: field apiKey: environment variable NOPE_KEY is not set",
				":3: search.embeddings: field timeout: want a positive duration such as 2s",
			},
		},
		{
			// The endpoint's own URL for the base: POST .../embeddings/embeddings would be
			// answered 404, every request, with nothing to say which URL was asked.
			name: "search embeddings endpoint URL",
			yaml: "servers: []\nsearch:\n  embeddings: {url: 'https://api.openai.com/v1/embeddings/', model: m}\n",
			want: []string{
				":3: search.embeddings: field url: want the API's base URL, without /embeddings (POST URL/embeddings is sent), such as https://api.openai.com/v1",
			},
		},
		{
			name: "streams",
			yaml: "servers: []\nstreams: {resultsMaxAge: 10s, resultsMaxBytes: 12 parsecs, auditMaxAge: forever, auditMaxBytes: 100KiB}\n",
			want: []string{
				":2: streams: field resultsMaxAge: want a duration of at least 10m (the call ids' de-duplication window), such as 24h",
				":2: streams: field resultsMaxBytes: want a size of at least 1MiB, such as 10GiB",
				":2: streams: field auditMaxAge: want a duration of at least 1m, such as 24h",
				":2: streams: field auditMaxBytes: want a size of at least 1MiB, such as 10GiB",
			},
		},
		{
			name: "embeddedNats",
			yaml: "servers: []\nembeddedNats: {sync: 1ms, maxStore: 12 parsecs, maxMemory: 100KiB}\n",
			want: []string{
				":2: embeddedNats: field sync: want \"always\" or a duration from 100ms to 24h, such as 1s",
				":2: embeddedNats: field maxStore: want a size of at least 1MiB, such as 10GiB",
				":2: embeddedNats: field maxMemory: want a size of at least 1MiB, such as 10GiB",
			},
		},
		{
			name: "embeddedNats sync word",
			yaml: "servers: []\nembeddedNats: {sync: sometimes}\n",
			want: []string{":2: embeddedNats: field sync: want \"always\" or a duration from 100ms to 24h, such as 1s"},
		},
		{
			name: "search embeddings field",
			yaml: "servers: []\nsearch:\n  embeddings: {url: 'https://x/v1', modle: m}\n",
			want: []string{":3: search.embeddings: field modle: unknown field (known: apiKey, dimensions, model, timeout, url)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadConfig(path, lookupTest)
			if err == nil {
				t.Fatal("loadConfig succeeded, want an error")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, path+w)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("error:\ngot  %s\nwant %s", got, strings.Join(want, "\n"))
			}
			for name, secret := range testEnv {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error text holds the value of %s", name)
				}
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := loadConfig(filepath.Join(t.TempDir(), "nope.yaml"), lookupTest)
	if !errors.Is(err, ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrConfig and ErrNotExist", err)
	}
}

func TestExpandEnv(t *testing.T) {
	tests := []struct {
		in, want string
		secrets  []string
		err      string
	}{
		{in: "plain", want: "plain"},
		{in: "${HOST}", want: "tools.example.com", secrets: []string{"tools.example.com"}},
		{in: "a${HOST}b${EMPTY}c", want: "atools.example.combc", secrets: []string{"tools.example.com"}},
		{in: "$$HOME and $$${HOST}", want: "$HOME and $tools.example.com", secrets: []string{"tools.example.com"}},
		{in: "cost $5 $", want: "cost $5 $"},
		{in: "${}", err: "${} is not a valid reference (want ${ENV_VAR})"},
		{in: "${UNSET}", err: "environment variable UNSET is not set"},
	}
	for _, tt := range tests {
		got, secrets, err := expandEnv(tt.in, lookupTest)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("expandEnv(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || !reflect.DeepEqual(secrets, tt.secrets) {
			t.Errorf("expandEnv(%q) = %q, %q, %v; want %q, %q", tt.in, got, secrets, err, tt.want, tt.secrets)
		}
	}
}

func TestDemoConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := demoConfig(dir, []string{"kb", "logging", "ticketing"})
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	servers := cfg.ServerConfigs()
	if len(servers) != 3 {
		t.Fatalf("got %d servers, want 3", len(servers))
	}
	for _, s := range servers {
		want := []string{"demo-server", s.Name, "--control", filepath.Join(dir, "demo", s.Name+".control.json")}
		if s.Transport != "stdio" || s.Command != exe || !reflect.DeepEqual(s.Args, want) || s.Description == "" {
			t.Errorf("server %+v, want stdio %s %v with a description", s, exe, want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "demo")); err != nil || !st.IsDir() {
		t.Errorf("demo control directory not created: %v", err)
	}
}

// TestDocumentedConfigs loads the configuration examples the docs show: deploy/mcpstream.yaml
// and the YAML block of README.md's Configuration section.
func TestDocumentedConfigs(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "GITHUB_TOKEN" {
			return "ghp_example", true
		}
		return "", false
	}
	cfg, err := loadConfig(filepath.Join("..", "..", "deploy", "mcpstream.yaml"), lookup)
	if err != nil {
		t.Fatalf("deploy/mcpstream.yaml: %v", err)
	}
	if len(cfg.Servers) != 3 || cfg.Policy == nil || cfg.Limits == nil {
		t.Errorf("deploy/mcpstream.yaml: %d servers, policy %v, limits %v", len(cfg.Servers), cfg.Policy != nil, cfg.Limits != nil)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Configuration")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml block under ## Configuration")
	}
	path := filepath.Join(t.TempDir(), "readme.yaml")
	if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := loadConfig(path, lookup)
	if err != nil {
		t.Fatalf("README.md configuration example: %v", err)
	}
	for name, c := range map[string]*fileConfig{"README.md": rc, "deploy/mcpstream.yaml": cfg} {
		if o := c.streamOptions(3); o.ResultsMaxAge != 24*time.Hour || o.ResultsMaxBytes != 20<<30 || o.AuditMaxAge != 720*time.Hour || o.AuditMaxBytes != 60<<30 || o.Replicas != 3 {
			t.Errorf("%s: streams section gives %+v", name, o)
		}
	}
	if e := rc.embeddedNATS(); e.SyncInterval != time.Second || e.MaxStore != 50<<30 || e.MaxMemory != 1<<30 || e.SyncAlways {
		t.Errorf("README.md: embeddedNats section gives %+v", e)
	}
}

func TestEmbeddedNATSConfig(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want natsembed.Config
	}{
		{"servers: []\n", natsembed.Config{}},
		{"servers: []\nembeddedNats: {sync: always}\n", natsembed.Config{SyncAlways: true}},
		{"servers: []\nembeddedNats: {sync: ALWAYS, maxMemory: 1GiB}\n", natsembed.Config{SyncAlways: true, MaxMemory: 1 << 30}},
		{"servers: []\nembeddedNats: {sync: 1s, maxStore: 50GiB}\n", natsembed.Config{SyncInterval: time.Second, MaxStore: 50 << 30}},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, lookupTest)
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if got := cfg.embeddedNATS(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: embedded server configuration %+v, want %+v", c.yaml, got, c.want)
		}
	}
}

func TestSearchEmbeddingsConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("servers: []\nsearch:\n  embeddings:\n    url: http://127.0.0.1:9/v1\n    model: mini\n    apiKey: ${GITHUB_TOKEN}\n    dimensions: 256\n    timeout: 500ms\n"), 0o644)
	cfg, err := loadConfig(path, lookupTest)
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.embedder
	if e == nil || e.BaseURL != "http://127.0.0.1:9/v1" || e.Model != "mini" || e.APIKey != testEnv["GITHUB_TOKEN"] || e.Dimensions != 256 {
		t.Fatalf("embedder = %+v", e)
	}
	if cfg.embedTimeout != 500*time.Millisecond || !slices.Contains(cfg.embedSecrets, testEnv["GITHUB_TOKEN"]) {
		t.Errorf("timeout %v, secrets %d", cfg.embedTimeout, len(cfg.embedSecrets))
	}
	// ${ENV_VAR} in the URL, as in a server's: resolved, and the values are secrets (audit
	// events, the client's errors).
	os.WriteFile(path, []byte("servers: []\nsearch:\n  embeddings:\n    url: https://${HOST}/v1?api_key=${DB_PASSWORD}\n    model: mini\n"), 0o644)
	cfg, err = loadConfig(path, lookupTest)
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.embedder; e == nil || e.BaseURL != "https://tools.example.com/v1?api_key="+testEnv["DB_PASSWORD"] {
		t.Fatalf("embedder = %+v, want the URL's references resolved", e)
	}
	for _, v := range []string{testEnv["HOST"], testEnv["DB_PASSWORD"]} {
		if !slices.Contains(cfg.embedSecrets, v) || !slices.Contains(cfg.embedder.Secrets, v) {
			t.Errorf("%q is not a secret: %q / %q", v, cfg.embedSecrets, cfg.embedder.Secrets)
		}
	}
	os.WriteFile(path, []byte("servers: []\nsearch:\n  embeddings:\n    url: https://${NOT_SET_ANYWHERE}/v1\n    model: mini\n"), 0o644)
	if _, err := loadConfig(path, lookupTest); err == nil || !strings.Contains(err.Error(), "NOT_SET_ANYWHERE is not set") {
		t.Errorf("an unset variable in the URL: %v", err)
	}
	// A key read from a file with its line break: net/http would refuse every request.
	os.WriteFile(path, []byte("servers: []\nsearch:\n  embeddings:\n    url: http://127.0.0.1:9/v1\n    model: mini\n    apiKey: ${KEY_FROM_FILE}\n"), 0o644)
	withBreak := func(name string) (string, bool) {
		if name == "KEY_FROM_FILE" {
			return "sk-from-file\n", true
		}
		return lookupTest(name)
	}
	if _, err := loadConfig(path, withBreak); err == nil || !strings.Contains(err.Error(), "field apiKey") ||
		!strings.Contains(err.Error(), "control character") || strings.Contains(err.Error(), "sk-from-file") {
		t.Errorf("a key with a line break: %v", err)
	}
	// Without the section: lexical only.
	os.WriteFile(path, []byte("servers: []\n"), 0o644)
	if cfg, err := loadConfig(path, lookupTest); err != nil || cfg.embedder != nil {
		t.Errorf("no search section: %v %+v", err, cfg.embedder)
	}
}
