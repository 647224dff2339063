package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestNATSConfigs loads the shipped NATS configurations with nats-server's own parser and checks
// what mcpstream relies on: JetStream on, 8 MB payloads, and (for deploy/) a 3-node route mesh.
func TestNATSConfigs(t *testing.T) {
	files := []string{filepath.Join("..", "..", "nats.conf")}
	for i := 1; i <= 3; i++ {
		files = append(files, filepath.Join("..", "..", "deploy", fmt.Sprintf("nats-%d.conf", i)))
	}
	for i, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			opts, err := server.ProcessConfigFile(f)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !opts.JetStream {
				t.Errorf("JetStream is off")
			}
			if opts.MaxPayload != subjects.MaxEventBytes {
				t.Errorf("max_payload = %d, want %d", opts.MaxPayload, subjects.MaxEventBytes)
			}
			if opts.MaxPending <= int64(opts.MaxPayload) {
				t.Errorf("max_pending %d must exceed max_payload", opts.MaxPending)
			}
			if i == 0 {
				if opts.Host != "127.0.0.1" || opts.Port != 4222 {
					t.Errorf("listen = %s:%d, want 127.0.0.1:4222", opts.Host, opts.Port)
				}
				return
			}
			if want := fmt.Sprintf("nats-%d", i); opts.ServerName != want {
				t.Errorf("server_name = %q, want %q", opts.ServerName, want)
			}
			if opts.Cluster.Name != "mcpstream" || len(opts.Routes) != 3 {
				t.Errorf("cluster %q with %d routes, want mcpstream with 3", opts.Cluster.Name, len(opts.Routes))
			}
		})
	}
}

// TestDeployUnits checks that the systemd units run real subcommands with flags that exist.
func TestDeployUnits(t *testing.T) {
	units, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.service"))
	if err != nil || len(units) != 3 {
		t.Fatalf("units: %v, %v", units, err)
	}
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		var exec string
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				exec = v
			}
		}
		args := strings.Fields(exec)
		if len(args) < 2 || filepath.Base(args[0]) != "mcpstream" {
			t.Fatalf("%s: ExecStart %q", u, exec)
		}
		name := args[1]
		c, ok := commands[name]
		if !ok {
			t.Errorf("%s: no subcommand %q", u, name)
			continue
		}
		if _, isRole := findRole(name); !isRole {
			t.Errorf("%s: %q is not a role", u, name)
		}
		// A unit that starts stdio servers (npx, uvx) under ProtectHome and ProtectSystem=strict
		// must give them a home and a cache it may write: /home is hidden and the rest is
		// read-only but for the unit's own directories.
		if name == "registrysync" {
			for _, want := range []string{"StateDirectory=mcpstream", "CacheDirectory=mcpstream",
				"Environment=HOME=/var/lib/mcpstream", "Environment=npm_config_cache=/var/cache/mcpstream/"} {
				if !strings.Contains(string(data), want) {
					t.Errorf("%s: no %q: npx would find no writable home or cache", u, want)
				}
			}
			// SIGTERM for registrysync alone: it stops its stdio servers itself, once their
			// calls in flight are done (systemd's default sends it to the whole cgroup).
			if !strings.Contains(string(data), "\nKillMode=mixed\n") {
				t.Errorf("%s: no KillMode=mixed: a stop would send SIGTERM to the stdio servers under their calls in flight", u)
			}
		}
		// --help lists the flags; every flag the unit uses must be there.
		var out strings.Builder
		c.run(t.Context(), []string{"--help"}, &out, &out)
		for _, a := range args[2:] {
			if flag, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(out.String(), "-"+flag+" ") {
				t.Errorf("%s: %s has no flag --%s", u, name, flag)
			}
		}
	}
}

func TestSnapshotSummaryLarge(t *testing.T) {
	p := &eventPrinter{prev: map[string][]string{}}
	names := make([]string, 3000)
	for i := range names {
		names[i] = fmt.Sprintf("tool%04d", i)
	}
	snap := func(n []string) []byte {
		b, _ := json.Marshal(snapshot("big", subjects.KindTools, t0, tools(n...)))
		return b
	}
	subj := subjects.RegistrySnapshot("big", subjects.KindTools)
	got := p.summary(subj, snap(names))
	want := "big snapshot tools: 3000 items: tool0000, tool0001, tool0002, tool0003, tool0004, tool0005, tool0006, tool0007, …2992 more ttl=30s"
	if got != want {
		t.Errorf("first snapshot:\ngot  %s\nwant %s", got, want)
	}
	got = p.summary(subj, snap(append(names[20:], "zeta", "alpha")))
	want = "big snapshot tools: 2982 items (+alpha +zeta -tool0000 -tool0001 -tool0002 -tool0003 -tool0004 -tool0005 -tool0006 -tool0007 -…12 more) ttl=30s"
	if got != want {
		t.Errorf("second snapshot:\ngot  %s\nwant %s", got, want)
	}
}
