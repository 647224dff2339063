package liveness

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A process paused (SIGSTOP, a frozen VM, starved of CPU) right after its round trip to the
// NATS server, while a silent connector's servers are due: the heartbeats of the other
// connectors that came meanwhile wait unread (in its connection, or in the channel of the
// heartbeats). Only the heartbeats that came before the server's answer are taken into account,
// so the silence must be measured up to the round trip, not up to when the check goes on after
// the pause: a connector that beat all along is not declared lost with the silent one.
func TestPauseAfterRoundTripDeclaresOnlyTheSilent(t *testing.T) {
	env := natstest.Start(t)
	const period = 200 * time.Millisecond // 600 ms of silence declares
	var once sync.Once
	paused := make(chan struct{})
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watchdog{NC: nc, JS: js, Log: logger(t), CheckEvery: 20 * time.Millisecond}
	w.afterRoundTrip = func() {
		once.Do(func() {
			time.Sleep(10 * period) // the pause, far more than 3 periods
			close(paused)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the watchdog reading statuses", w.Ready)

	// "alive" beats every 20 ms, from before its status to the end of the test.
	beatEvery(t, env.NC, "alive", 20*time.Millisecond, 20)
	publish := func(server, connector string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: period.Milliseconds(), At: time.Now()})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	publish("served", "alive")
	waitFor(t, "alive's heartbeats heard", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.beats["alive"].IsZero()
	})
	publish("orphan", "ghost") // never beats
	waitFor(t, "orphan declared", func() bool { return last(statuses(t, env, "orphan")).Code == subjects.CodeConnectorLost })
	select {
	case <-paused:
	default:
		t.Fatal("orphan declared without the pause")
	}
	if st := last(statuses(t, env, "served")); st.Code == subjects.CodeConnectorLost {
		t.Errorf("the server of a connector that beat all along declared lost after a pause of the watchdog: %+v", st)
	}
	if d := w.Declared(); d != 1 {
		t.Errorf("%d declarations, want 1 (orphan)", d)
	}
}
