package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A registrysync process killed with SIGKILL says nothing on the way out; the indexer replica's
// watchdog declares its servers unavailable (connector_lost) after 3 silent heartbeat periods
// (15 s), and their tools leave search.
func TestKilledRegistrySyncDeclaredLost(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	cmd := exec.Command(os.Args[0], "registrysync", "--nats", env.URL, "--data", t.TempDir(), "--http-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	runIndexerRole(t, env.URL, t.TempDir(), "0")
	p := &upProcess{nats: env.URL}
	p.waitDemoReady(t)
	const query = "knowledge base document"
	waitFor(t, "kb tools in search", 400, func() bool { return strings.Contains(searchNames(t, env.URL, query), "kb__") })

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	start := time.Now()
	waitFor(t, "every server connector_lost", 1200, func() bool {
		for _, r := range p.servers(t) {
			if r.Status != subjects.StatusUnavailable || r.Code != subjects.CodeConnectorLost {
				return false
			}
		}
		return true
	})
	t.Logf("declared %s after SIGKILL", time.Since(start).Round(time.Second))
	if got := searchNames(t, env.URL, query); strings.Contains(got, "kb__") {
		t.Errorf("search still offers the kb tools of a killed registrysync: %s", got)
	}
}
