package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerCwd: a stdio server's cwd (the MCP SDKs' StdioServerParameters.cwd: where a
// project-local server such as `uv run server.py` must start) is its child's working
// directory. A relative one is taken from the config file's directory, not from wherever
// mcpstream was started; ${ENV} references resolve as in the other fields; http and sse
// servers have none.
func TestServerCwd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpstream.yaml")
	text := `servers:
  - name: rel
    command: ./server.py
    cwd: project/sub
  - name: abs
    command: uv
    args: [run, server.py]
    cwd: /srv/mcp
  - name: env
    command: node
    cwd: ${PROJECTS}/weather
  - name: none
    command: node
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, func(k string) (string, bool) {
		if k == "PROJECTS" {
			return "/home/ops/projects", true
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	want := map[string]string{
		"rel":  filepath.Join(dir, "project", "sub"),
		"abs":  "/srv/mcp",
		"env":  "/home/ops/projects/weather",
		"none": "",
	}
	for _, sc := range cfg.ServerConfigs() {
		if sc.Dir != want[sc.Name] {
			t.Errorf("%s: Dir %q, want %q", sc.Name, sc.Dir, want[sc.Name])
		}
	}

	bad := writeConfig(t, "bad.yaml", "servers:\n  - name: web\n    url: https://x.example/mcp\n    cwd: /tmp\n")
	_, err = loadConfig(bad, lookupTest)
	if err == nil || !strings.Contains(err.Error(), "field cwd: only for transport stdio") {
		t.Errorf("cwd on an http server: %v, want refused naming the field", err)
	}
}
