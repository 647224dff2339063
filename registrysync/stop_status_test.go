package registrysync

import (
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A stopping registrysync publishes its servers unavailable (connector_stopped), so the catalog
// and executors stop showing them ready; started again, they come back ready.
func TestStopPublishesConnectorStopped(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "svc", URL: url})
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("svc"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.stop(t)
	stopped := rec.wait(ready.seq, "stopped", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped))
	if r := stopped.ev.Status.Reason; r == "" {
		t.Error("stopped status without a reason")
	}

	h2 := run(t, h.env, cfg)
	rec.wait(stopped.seq, "ready again", isStatus(subjects.StatusReady, ""))
	h2.stop(t)
}

// Two processes running the same server: the one that stops leaves the status to the other.
func TestStopLeavesStatusToAnotherProcess(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "twice", URL: url})
	a := run(t, nil, cfg)
	rec := record(t, a.env, subjects.RegistryServer("twice"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	b := run(t, a.env, cfg)
	waitUntil(t, "b ready", func() bool { return b.m.Statuses()["twice"].Status == subjects.StatusReady })
	a.stop(t)
	// b stopping now publishes connector_stopped: nothing of the kind may come before it.
	before := lastSeq(t, a.env, subjects.RegistryStatus("twice"))
	b.stop(t)
	stopped := rec.wait(0, "stopped", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped))
	if stopped.seq <= before {
		t.Fatalf("connector_stopped published while another process ran the server: %s", stopped)
	}
}
