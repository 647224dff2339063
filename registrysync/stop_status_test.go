package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// `servers remove` run while a registrysync stops (its endpoints are gone, a call still drains)
// retracts the server: the stopping process's connector_stopped must not land over "removed".
func TestRemoveWhileStoppingStaysRemoved(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "dropped", URL: url})
	cfg.DrainTimeout = 20 * time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("dropped"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	called := make(chan subjects.DispatchReply, 1)
	go func() {
		called <- h.m.Dispatch(context.Background(), "dropped", subjects.DispatchRequest{V: 1, Tool: "slow", Arguments: json.RawMessage(`{"ms":3000}`)})
	}()
	time.Sleep(300 * time.Millisecond) // the call is on its way
	h.cancel()                         // stopping: the call drains
	body, _ := json.Marshal(subjects.RelistRequest{V: subjects.Version})
	waitUntil(t, "the endpoints gone", func() bool {
		_, err := h.env.NC.Request(subjects.Relist("dropped"), body, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := New(h.env.JS, h.env.NC, Config{}, testLogger(t)).Remove(ctx, "dropped"); err != nil {
		t.Fatalf("remove while the registrysync stops: %v", err)
	}
	removed := rec.wait(0, "removed", isStatus(subjects.StatusRemoved, ""))
	if r := <-called; r.Error != nil {
		t.Errorf("the call in flight: %+v", r.Error)
	}
	h.stop(t)
	if seq := lastSeq(t, h.env, subjects.RegistryStatus("dropped")); seq != removed.seq {
		for _, e := range rec.all() {
			if e.seq > removed.seq && e.ev.Status != nil {
				t.Errorf("status after the removal: %s", e)
			}
		}
		t.Fatalf("the last status is #%d, not the removal #%d", seq, removed.seq)
	}
}
