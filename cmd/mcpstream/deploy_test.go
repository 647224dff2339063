package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
		args, refused := unitCommand(t, unitExecStart(t, filepath.Base(u)), "0")
		if len(args) < 1 || refused != nil {
			t.Fatalf("%s: ExecStart runs %q (%v)", u, args, refused)
		}
		name := args[0]
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
		for _, a := range args[1:] {
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

// TestNATSConfAuthorizationExample enables the authorization block nats.conf shows (commented
// out) and checks that it works as documented: the roles, run as the "mcpstream" user, start and
// serve; the tenant user "acme", with its own inbox prefix, can search, inspect and call as an
// acme principal, and cannot act for another tenant.
func TestNATSConfAuthorizationExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo servers (run without -short)")
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// Uncomment "# authorization {" through its closing "# }".
	var conf []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "# authorization {") {
			in = true
		}
		if in {
			line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
			if line == "}" {
				in = false
			}
		}
		conf = append(conf, line)
	}
	if in || !strings.Contains(strings.Join(conf, "\n"), "\nauthorization {") {
		t.Fatal("nats.conf has no commented authorization { ... } block")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPSTREAM_NATS_PASSWORD", "svc-pw")
	t.Setenv("ACME_PASSWORD", "acme-pw")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats.conf with its authorization block: %v", err)
	}
	if len(opts.Users) != 2 {
		t.Fatalf("%d users, want mcpstream and acme", len(opts.Users))
	}
	opts.StoreDir = filepath.Join(dir, "js")
	opts.HTTPPort = 0
	ns := startNATS(t, opts)
	addr := ns.Addr().String()

	// Every role in one process, as the service user.
	p := &upProcess{data: t.TempDir(), out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		p.done <- run(ctx, []string{"up", "--nats", "nats://mcpstream:svc-pw@" + addr, "--data", p.data, "--http-listen", "127.0.0.1:0"}, p.out, p.errOut)
	}()
	t.Cleanup(func() {
		if err := p.stop(t); err != nil {
			t.Errorf("up did not stop cleanly: %v", err)
		}
	})
	p.nats, p.http = waitStartLine(t, "up", 600, p.out, p.errOut, p.done)
	p.nats = "nats://mcpstream:svc-pw@" + addr // the start line hides the password
	waitFor(t, "up healthy", 600, func() bool { code, _ := p.healthz(t); return code == 200 })
	p.waitDemoReady(t)

	acme := []string{"--nats", "nats://acme:acme-pw@" + addr, "--nats-inbox", "_INBOX.acme", "--principal", "acme/alice"}
	cmd := func(args ...string) (string, error) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer ccancel()
		// args after acme's flags: a later --principal wins.
		out, errOut, err := runCmd(t, cctx, append(append([]string{args[0]}, acme...), args[1:]...)...)
		if err != nil {
			return out + errOut, err
		}
		return out, nil
	}
	if out, err := cmd("search", "refund policy", "--json"); err != nil || !strings.Contains(out, "kb__search_knowledge_base") {
		t.Errorf("search as acme: %v\n%s", err, out)
	}
	if out, err := cmd("inspect", "kb__search_knowledge_base", "--json"); err != nil || !strings.Contains(out, "inputSchema") {
		t.Errorf("inspect as acme: %v\n%s", err, out)
	}
	if out, err := cmd("call", "kb__search_knowledge_base", `{"query":"refund policy","topK":1}`, "--json"); err != nil || !strings.Contains(out, `"structuredContent"`) {
		t.Errorf("call as acme: %v\n%s", err, out)
	}
	// Another tenant's subjects are refused by NATS.
	if out, err := cmd("search", "refund policy", "--json", "--principal", "globex/mallory"); err == nil || !strings.Contains(out, `Publish to \"mcpstream.v1.catalog.globex.search\"`) {
		t.Errorf("search as globex with acme's user: %v\n%s", err, out)
	}
	if out, err := cmd("call", "kb__search_knowledge_base", `{"query":"x"}`, "--principal", "globex/mallory"); err == nil || !strings.Contains(out+err.Error(), `Publish to "mcpstream.v1.exec.globex"`) {
		t.Errorf("call as globex with acme's user: %v\n%s", err, out)
	}
}

// TestDeployUnitsFlagsParse: every unit's command line (with %i = 0) parses with its
// subcommand's own flag set (a flag the help text only mentions in prose, or a value of the wrong
// type, fails), and the loopback HTTP ports, unit names and NATS ports agree with deploy/README.md
// (every instance's port: TestDeployUnitPorts).
func TestDeployUnitsFlagsParse(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantListen := map[string]string{ // from the README: registrysync on 8081, indexer@N on 8100+N, executor@N on 8300+N
		"registrysync": "127.0.0.1:8081", "indexer": "127.0.0.1:8100", "executor": "127.0.0.1:8300",
	}
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "registrysync on 8081, indexer@N on 8100+N, executor@N on 8300+N") {
		t.Errorf("deploy/README.md no longer states the units' HTTP ports; update this test with it")
	}
	units := map[string]string{}
	for _, f := range []string{"mcpstream-registrysync.service", "mcpstream-indexer@.service", "mcpstream-executor@.service"} {
		units[f] = readDeploy(t, f)
		args, refused := unitCommand(t, unitExecStart(t, f), "0")
		if refused != nil || len(args) < 1 {
			t.Fatalf("%s: ExecStart runs %q (%v)", f, args, refused)
		}
		name := args[0]
		listen := ""
		for i, a := range args {
			if a == "--http-listen" && i+1 < len(args) {
				listen = args[i+1]
			}
			if a == "--log-format" && i+1 < len(args) && args[i+1] != "json" && args[i+1] != "text" {
				t.Errorf("%s: --log-format %s", f, args[i+1])
			}
		}
		if listen != wantListen[name] {
			t.Errorf("%s: --http-listen %q, README says %q", f, listen, wantListen[name])
		}
		c, ok := commands[name]
		if !ok {
			t.Fatalf("%s: no subcommand %q", f, name)
		}
		var help strings.Builder
		c.run(t.Context(), []string{"--help"}, &help, &help)
		for _, a := range args[1:] {
			flagName, ok := strings.CutPrefix(a, "--")
			if !ok {
				continue
			}
			if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(flagName) + `( |$)`).MatchString(help.String()) {
				t.Errorf("%s: %s has no flag --%s (not among its flags in --help)", f, name, flagName)
			}
		}
		// Parsing stops at the final --help, after every value has been parsed.
		var out, errOut strings.Builder
		if err := c.run(t.Context(), append(args[1:len(args):len(args)], "--help"), &out, &errOut); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %q does not parse: %v\n%s", f, args, err, errOut.String())
		}
	}
	// README step 3 enables units that exist.
	for _, m := range regexp.MustCompile(`mcpstream-(registrysync|indexer@\d|executor@\d)\b`).FindAllStringSubmatch(string(readme), -1) {
		file := "mcpstream-" + regexp.MustCompile(`@\d$`).ReplaceAllString(m[1], "@") + ".service"
		if _, ok := units[file]; !ok {
			t.Errorf("README names %s: no %s", m[0], file)
		}
	}
	// The env file's NATS URLs are the three nodes' client ports.
	env, err := os.ReadFile(filepath.Join("..", "..", "deploy", "mcpstream.env"))
	if err != nil {
		t.Fatal(err)
	}
	var urls string
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, envNATS+"="); ok {
			urls = v
		}
	}
	var want []string
	for i := 1; i <= 3; i++ {
		opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "deploy", fmt.Sprintf("nats-%d.conf", i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("nats://%s:%d", opts.ServerName, opts.Port))
		if opts.Port != 4222 || opts.HTTPPort != 8222 || opts.Cluster.Port != 6222 {
			t.Errorf("nats-%d.conf: ports %d/%d/%d, README says clients 4222, monitoring 8222, routes 6222", i, opts.Port, opts.HTTPPort, opts.Cluster.Port)
		}
	}
	if urls != strings.Join(want, ",") {
		t.Errorf("mcpstream.env %s=%q, want %q", envNATS, urls, strings.Join(want, ","))
	}
}
