//go:build unix

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestServerCwdConfigFromPipe: a relative cwd is taken from the config file's directory, but a
// configuration read from a pipe (--config <(envsubst < tmpl.yaml), --config /dev/stdin, as the
// README suggests) has none: the directory of /dev/fd/63 is /dev/fd, and the server was started
// in /dev/fd/project without a word at load (it then failed to start, again and again). It is
// refused, naming the field; an absolute cwd is kept.
func TestServerCwdConfigFromPipe(t *testing.T) {
	load := func(text string) (*fileConfig, error) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() {
			w.WriteString(text)
			w.Close()
		}()
		return loadConfig("/dev/fd/"+strconv.Itoa(int(r.Fd())), noEnv)
	}
	cfg, err := load("servers:\n  - name: rel\n    command: ./server.py\n    cwd: project\n")
	if err == nil {
		t.Fatalf("relative cwd from a pipe: accepted, Dir %q; want refused", cfg.ServerConfigs()[0].Dir)
	}
	if !strings.Contains(err.Error(), ":4: servers[0] (rel): field cwd: ") || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("err = %v, want the field cwd, its line, and to give an absolute one", err)
	}
	cfg, err = load("servers:\n  - name: abs\n    command: ./server.py\n    cwd: /srv/mcp\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ServerConfigs()[0].Dir; got != "/srv/mcp" {
		t.Errorf("absolute cwd from a pipe: Dir %q", got)
	}
	for _, path := range []string{"/dev/stdin", "/proc/self/fd/0"} {
		if _, err := parseConfig(path, []byte("servers:\n  - name: rel\n    command: x\n    cwd: project\n"), noEnv); err == nil {
			t.Errorf("%s: relative cwd accepted", path)
		}
	}
	// A file of one's own in a tmpfs under /dev (secrets rendered to /dev/shm) has its directory.
	cfg, err = parseConfig("/dev/shm/mcp/c.yaml", []byte("servers:\n  - name: rel\n    command: x\n    cwd: project\n"), noEnv)
	if err != nil || cfg.ServerConfigs()[0].Dir != "/dev/shm/mcp/project" {
		t.Errorf("/dev/shm: %v", err)
	}
}
