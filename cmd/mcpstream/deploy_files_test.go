package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// readDeploy reads a file of deploy/.
func readDeploy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeployFilesAgree: what the deploy/ files say of each other holds, so that they cannot rot
// apart. The units read /etc/mcpstream/mcpstream.yaml with the environment of
// /etc/mcpstream/mcpstream.env, as README step 2 installs them; every ${NAME} the configuration
// references is named in the env file (set or as a placeholder to fill), and with them the
// configuration loads as each role loads it (registrysync and executor need the servers'
// secrets, the indexer does not); each unit's --data is its systemd StateDirectory (the one
// directory ProtectSystem=strict leaves writable); the NATS files are where README step 1 and
// their own comments start them, valid for the pinned nats-server.
func TestDeployFilesAgree(t *testing.T) {
	readme := strings.Join(strings.Fields(readDeploy(t, "README.md")), " ")
	env := readDeploy(t, "mcpstream.env")
	yaml := readDeploy(t, "mcpstream.yaml")
	if !strings.Contains(readme, "put `mcpstream.yaml` and `mcpstream.env` in `/etc/mcpstream/`") {
		t.Errorf("deploy/README.md no longer says where mcpstream.yaml and mcpstream.env go; update this test with it")
	}

	// The env file: KEY=VALUE lines (systemd's EnvironmentFile), placeholders commented out.
	vars := map[string]string{}
	placeholders := map[string]bool{}
	for _, line := range strings.Split(env, "\n") {
		line = strings.TrimSpace(line)
		commented := strings.HasPrefix(line, "#")
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), "=")
		if !ok || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(k) {
			continue
		}
		if commented {
			placeholders[k] = true
		} else {
			vars[k] = v
		}
	}
	refs := map[string]bool{}
	// (Its comments name ${ENV_VAR} as the syntax: not a reference.)
	uncommented := regexp.MustCompile(`(?m)(^|\s)#.*$`).ReplaceAllString(yaml, "")
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(uncommented, -1) {
		refs[m[1]] = true
		if _, set := vars[m[1]]; !set && !placeholders[m[1]] {
			t.Errorf("mcpstream.yaml references ${%s}, which mcpstream.env does not name", m[1])
		}
	}
	if len(refs) == 0 {
		t.Errorf("mcpstream.yaml references no ${NAME}: the Credentials note of deploy/README.md describes nothing")
	}
	path := filepath.Join("..", "..", "deploy", "mcpstream.yaml")
	for _, role := range []string{"registrysync", "indexer", "executor"} {
		secrets := role != "indexer"
		lookup := func(name string) (string, bool) {
			if v, ok := vars[name]; ok {
				return v, true
			}
			if placeholders[name] && secrets { // filled in by the operator
				return "example-" + strings.ToLower(name), true
			}
			return "", false
		}
		cfg, err := loadConfigFor(path, lookup, secrets)
		if err != nil {
			t.Errorf("mcpstream.yaml as %s loads it: %v", role, err)
			continue
		}
		if role != "indexer" && len(cfg.resolved) != len(cfg.Servers) {
			t.Errorf("mcpstream.yaml as %s: %d of %d servers resolved", role, len(cfg.resolved), len(cfg.Servers))
		}
	}

	// The units: the installed paths, and --data where systemd lets them write.
	units, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("units: %v %v", units, err)
	}
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		unit := string(data)
		name := filepath.Base(u)
		var exec []string
		settings := map[string][]string{}
		for _, line := range strings.Split(unit, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				settings[k] = append(settings[k], v)
			}
		}
		if e := settings["ExecStart"]; len(e) == 1 {
			exec, _ = unitCommand(t, e[0], "0")
		}
		flagValue := func(flag string) string {
			if i := slices.Index(exec, flag); i >= 0 && i+1 < len(exec) {
				return exec[i+1]
			}
			return ""
		}
		if got := flagValue("--config"); got != "/etc/mcpstream/mcpstream.yaml" {
			t.Errorf("%s: --config %q, want /etc/mcpstream/mcpstream.yaml (README step 2)", name, got)
		}
		if got := settings["EnvironmentFile"]; !slices.Equal(got, []string{"/etc/mcpstream/mcpstream.env"}) {
			t.Errorf("%s: EnvironmentFile %q, want /etc/mcpstream/mcpstream.env (README step 2)", name, got)
		}
		if got := settings["User"]; !slices.Equal(got, []string{"mcpstream"}) {
			t.Errorf("%s: User %q, want mcpstream (README step 2)", name, got)
		}
		state := settings["StateDirectory"]
		if len(state) != 1 || flagValue("--data") != "/var/lib/"+state[0] {
			t.Errorf("%s: --data %q is not its StateDirectory %q: under ProtectSystem=strict it could not write there", name, flagValue("--data"), state)
		}
		if settings["ProtectSystem"] == nil || settings["ProtectSystem"][0] != "strict" {
			t.Errorf("%s: ProtectSystem %q, want strict", name, settings["ProtectSystem"])
		}
		if !strings.Contains(readme, "`"+strings.TrimSuffix(name, ".service")+"`") && !strings.Contains(readme, "`"+name+"`") {
			t.Errorf("deploy/README.md does not describe %s", name)
		}
	}

	// The NATS nodes: where step 1 starts them, and valid for the pinned nats-server.
	for i := 1; i <= 3; i++ {
		file := fmt.Sprintf("nats-%d.conf", i)
		conf := readDeploy(t, file)
		start := fmt.Sprintf("nats-server -c /etc/nats/%s", file)
		if !strings.Contains(conf, start) {
			t.Errorf("%s: its comment does not say %q", file, start)
		}
		opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "deploy", file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !strings.HasPrefix(opts.StoreDir, "/var/lib/nats/") {
			t.Errorf("%s: store_dir %q", file, opts.StoreDir)
		}
		// nats-server checks the options as a whole when it builds the server (not started:
		// nothing listens, nothing is written; the store moved to a temporary directory).
		opts.StoreDir = t.TempDir()
		s, err := server.NewServer(opts)
		if err != nil {
			t.Errorf("%s: nats-server refuses its options: %v", file, err)
			continue
		}
		s.Shutdown()
	}
	if !strings.Contains(readme, "`nats-server -c /etc/nats/nats-1.conf`") {
		t.Errorf("deploy/README.md step 1 no longer starts nats-server with /etc/nats/nats-1.conf; update this test with it")
	}
}
