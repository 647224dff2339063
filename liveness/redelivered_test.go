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

// A status consumer made anew (after a failure: a JetStream hiccup, its consumer deleted) reads
// the last status of every server again. The same status read again is no news of its
// connector: its silence goes on counting from when the status was first seen. Counted from
// each re-read, a consumer that fails more often than 3 heartbeat periods kept a dead
// connector's servers from ever being declared lost.
func TestConsumerMadeAnewKeepsSilence(t *testing.T) {
	env := natstest.Start(t)
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rjs := &flakyJS{JetStream: js}
	w := &Watchdog{NC: nc, JS: rjs, Log: logger(t), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the watchdog reading statuses", w.Ready)
	publish := func(server, connector string, ms int64) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: ms, At: time.Now()})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	// A connector that never beats: lost after 3 periods of 500 ms.
	publish("s", "dead", 500)
	publish("wake", "", 0) // not watched: what wakes the consumer up to fail
	declared := func() bool { return last(statuses(t, env, "s")).Code == subjects.CodeConnectorLost }
	// The consumer fails as soon as it has read the last status of both servers again: made
	// anew after its backoff (250 ms ± 50%), well within the 1.5 s of silence.
	const remakes = 60
	for i := 0; i < remakes && !declared(); i++ {
		made := rjs.made.Load()
		waitFor(t, "the consumer reading both statuses", func() bool { return rjs.delivered.Load() >= 2 || declared() })
		rjs.failNext.Store(true)
		publish("wake", "", 0)
		waitFor(t, "the consumer made anew", func() bool { return rjs.made.Load() > made || declared() })
	}
	if !declared() {
		t.Fatalf("a connector silent all along not declared lost across %d re-reads of its status by a consumer made anew", remakes)
	}
}
