package main

import (
	"strings"
	"testing"
)

// TestServerCwdCommandTilde: no shell starts a stdio server, so nothing expands a "~": cwd
// "~/mcp/weather" was taken as relative to the config file's directory (/etc/mcpstream/~/mcp/weather)
// and command "~/bin/server" as relative to cwd, accepted at load, and the server then failed
// to start, again and again. Both are refused, naming the field and ${HOME}; a "~" inside a
// path, and in args (the server's own to read), are kept.
func TestServerCwdCommandTilde(t *testing.T) {
	for _, tt := range []struct{ text, field string }{
		{"servers:\n  - name: a\n    command: node\n    cwd: ~/mcp/weather\n", "field cwd: "},
		{"servers:\n  - name: a\n    command: node\n    cwd: \"~\"\n", "field cwd: "},
		{"servers:\n  - name: a\n    command: ~/bin/server\n", "field command: "},
	} {
		_, err := parseConfig("/etc/mcpstream/c.yaml", []byte(tt.text), lookupTest)
		if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "${HOME}") {
			t.Errorf("%q: %v; want refused, naming %q and ${HOME}", tt.text, err, tt.field)
		}
	}
	cfg, err := parseConfig("/etc/mcpstream/c.yaml", []byte("servers:\n  - name: a\n    command: ./x~/server\n    args: [\"~/data\"]\n    cwd: backup~\n"), lookupTest)
	if err != nil {
		t.Fatal(err)
	}
	if sc := cfg.ServerConfigs()[0]; sc.Dir != "/etc/mcpstream/backup~" || sc.Args[0] != "~/data" {
		t.Errorf("Dir %q, Args %q", sc.Dir, sc.Args)
	}
}
