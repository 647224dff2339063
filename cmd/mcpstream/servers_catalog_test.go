package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// collidingTools are two tool names of server "srv.a" whose encoded public names collide (see
// the indexer's TestPublicNameCollisionRefused).
var collidingTools = [2]string{"x)>*`#y", "x&{}(%y"}

// rejectingRegistry publishes n plain servers "s000".."s<n-1>" and a server "srv.a" whose list
// lost definitions: in registrysync (a name holding a secret, redacted; a name with a terminal
// escape) and in the catalog (a public-name collision).
func rejectingRegistry(t *testing.T, n int) *natstest.Env {
	t.Helper()
	env := natstest.Start(t)
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		publish(t, env.JS, subjects.RegistryStatus(name), status(name, subjects.StatusReady, t0))
		publish(t, env.JS, subjects.RegistrySnapshot(name, subjects.KindTools), snapshot(name, subjects.KindTools, t0, tools("t")))
	}
	sn := snapshot("srv.a", subjects.KindTools, t0, tools(collidingTools[0], collidingTools[1]))
	sn.Rejected = []subjects.Rejected{
		{Name: "get_[redacted]", Code: subjects.CodeSecretInName, Message: "its name holds a configured secret value"},
		{Name: "evil\x1b[31mred", Code: subjects.CodeInvalidDefinition, Message: "name holds the control character U+001B"},
	}
	publish(t, env.JS, subjects.RegistryStatus("srv.a"), status("srv.a", subjects.StatusReady, t0))
	publish(t, env.JS, subjects.RegistrySnapshot("srv.a", subjects.KindTools), sn)
	return env
}

// serveCatalog runs an indexer replica on env until the test ends, once it serves.
func serveCatalog(t *testing.T, env *natstest.Env) {
	t.Helper()
	cat, err := indexer.Open(indexer.Config{Dir: filepath.Join(t.TempDir(), "catalog")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { errc <- cat.Follow(ctx, env.JS) }()
	go func() { errc <- cat.Serve(ctx, env.NC) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
	})
	info, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	cl := indexer.Client{NC: env.NC, Timeout: time.Second}
	for i := range 1000 {
		if cat.Seq() >= last {
			if _, err := cl.Servers(ctx, "local", subjects.ServersRequest{Limit: 1}); err == nil {
				return
			}
		}
		if i == 999 {
			t.Fatal("catalog not serving after 1000 polls")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServersRejectedFromRegistry: `servers` showed no definition a server listed that was
// left out (a name holding a secret, an invalid one): they were in `events` only. They are
// listed after the table (sanitized) and in --json.
func TestServersRejectedFromRegistry(t *testing.T) {
	env := rejectingRegistry(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"servers_rejected.txt", []string{"servers"}},
		{"servers_rejected.json", []string{"servers", "--json"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, ctx, append(tt.args, "--nats", env.URL)...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tt.args, err, errOut)
			}
			if strings.Contains(out, "\x1b") {
				t.Errorf("a terminal escape reaches the output:\n%q", out)
			}
			golden(t, tt.golden, normalize(out))
		})
	}
}

// TestServersCatalogPages: `servers --catalog` lists what the catalog service says, following
// its pages (250 servers: three pages of the default 100), with the catalog's own rejections
// (name_collision); --limit asks for one page and says where the next starts.
func TestServersCatalogPages(t *testing.T) {
	env := rejectingRegistry(t, 250)
	serveCatalog(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	out, errOut, err := runCmd(t, ctx, "servers", "--catalog", "--json", "--nats", env.URL)
	if err != nil {
		t.Fatalf("servers --catalog: %v\n%s", err, errOut)
	}
	var rows []serverRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(rows) != 251 || rows[0].Name != "s000" || rows[249].Name != "s249" || rows[250].Name != "srv.a" {
		t.Fatalf("%d rows; want s000..s249 and srv.a in order", len(rows))
	}
	codes := []string{}
	for _, d := range rows[250].Rejected {
		codes = append(codes, d.Code)
	}
	if got, want := strings.Join(codes, ","), "secret_in_name,invalid_definition,name_collision"; got != want || rows[250].Tools != 1 {
		t.Errorf("srv.a: %d tools, rejected codes %s; want 1 tool and %s", rows[250].Tools, got, want)
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing (every page followed)", errOut)
	}

	out, errOut, err = runCmd(t, ctx, "servers", "--catalog", "--limit", "2", "--after", "s100", "--nats", env.URL)
	if err != nil {
		t.Fatalf("servers --catalog --limit 2: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "s101") || !strings.Contains(out, "s102") || strings.Contains(out, "s103") || strings.Contains(out, "s100 ") {
		t.Errorf("--limit 2 --after s100:\n%s", out)
	}
	if !strings.Contains(errOut, "--after s102") {
		t.Errorf("stderr %q, want the --after of the next page", errOut)
	}
	out, _, err = runCmd(t, ctx, "servers", "--catalog", "--after", "s249", "--nats", env.URL)
	if err != nil || !strings.Contains(out, "name_collision") || strings.Contains(out, "\x1b") {
		t.Errorf("--after s249: %v\n%s", err, out)
	}

	for _, args := range [][]string{
		{"servers", "--limit", "2"},
		{"servers", "--after", "x"},
		{"servers", "--principal", "acme/alice"},
		{"servers", "--catalog", "--limit", "5000"},
		{"servers", "--catalog", "--limit", "-1"},
	} {
		_, _, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 {
			t.Errorf("%v: %v, want exit status 2", args, err)
		}
	}
}
