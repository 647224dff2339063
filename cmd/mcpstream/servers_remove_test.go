package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// runRegistrySyncRole runs the registrysync role with the demo servers against env until cleanup.
func runRegistrySyncRole(t *testing.T, env *natstest.Env) *upProcess {
	t.Helper()
	p := &upProcess{data: t.TempDir(), out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		p.done <- run(ctx, []string{"registrysync", "--nats", env.URL, "--data", p.data, "--http-listen", "127.0.0.1:0"}, p.out, p.errOut)
	}()
	t.Cleanup(func() {
		if err := p.stop(t); err != nil {
			t.Errorf("registrysync did not stop cleanly: %v", err)
		}
	})
	waitFor(t, "the start line", 600, func() bool {
		m := startLine.FindStringSubmatch(p.out.String())
		if m != nil {
			p.nats, p.http = m[1], m[2]
		}
		return m != nil
	})
	waitFor(t, "/healthz 200", 1200, func() bool { code, _ := p.healthz(t); return code == http.StatusOK })
	return p
}

// A stopped registrysync leaves its servers unavailable (connector_stopped), not ready; `servers
// remove` retracts one that no process runs, and refuses one that a registrysync runs.
func TestServersRemove(t *testing.T) {
	env := natstest.Start(t)
	p := runRegistrySyncRole(t, env)
	var names []string
	for _, r := range p.waitDemoReady(t) {
		names = append(names, r.Name)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.servers(t) {
		if r.Status != subjects.StatusUnavailable || r.Code != subjects.CodeConnectorStopped {
			t.Errorf("after stop: %s is %s (%s), want unavailable (connector_stopped)", r.Name, r.Status, r.Code)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := runCmd(t, ctx, "servers", "remove", names[0], "--nats", env.URL)
	if err != nil || out != "removed "+names[0]+"\n" {
		t.Fatalf("servers remove %s: %v\n%s%s", names[0], err, out, errOut)
	}
	for _, r := range p.servers(t) {
		if r.Name == names[0] && (r.Status != subjects.StatusRemoved || r.Tools != 0) {
			t.Errorf("after remove: %+v, want removed with no tools", r)
		}
	}
	if _, errOut, err := runCmd(t, ctx, "servers", "remove", "never-there", "--nats", env.URL); exitStatus(err) != 1 || !strings.Contains(errOut, `no server "never-there"`) {
		t.Errorf("remove of an unknown server: %v %q", err, errOut)
	}
	if _, errOut, err := runCmd(t, ctx, "servers", "remove", "--nats", env.URL); exitStatus(err) != 2 || !strings.Contains(errOut, "name at least one server") {
		t.Errorf("remove without a name: %v %q", err, errOut)
	}

	// Running again, it runs the servers once more: removing one of them is refused.
	runRegistrySyncRole(t, env)
	waitFor(t, names[1]+" ready again", 400, func() bool {
		for _, r := range p.servers(t) {
			if r.Name == names[1] {
				return r.Status == subjects.StatusReady
			}
		}
		return false
	})
	if _, errOut, err := runCmd(t, ctx, "servers", "remove", names[1], "--nats", env.URL); exitStatus(err) != 1 || !strings.Contains(errOut, "run by a registrysync process (") {
		t.Errorf("remove of a running server: %v %q", err, errOut)
	}
	for _, r := range p.servers(t) {
		if r.Name == names[1] && r.Status != subjects.StatusReady {
			t.Errorf("a refused remove changed %s: %+v", names[1], r)
		}
	}
}
