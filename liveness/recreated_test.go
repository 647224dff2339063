package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The registry stream deleted and made again (an operator; a NATS restarted without its store,
// and a process making its streams at start) while the watchdog follows its statuses: the new
// stream's sequences start over from 1. The status consumer made itself again from the
// sequence after the last it had read (an ordered consumer's own reset), which the new stream
// reaches only after as many messages: the statuses stored until then were never read, and a
// silent connector named in them never declared. Here the watchdog's connection stalls while
// the stream is made again, so that its consumer's reset finds the new stream.
func TestStreamRecreatedStatusesFollowed(t *testing.T) {
	old := streamCheckEvery
	streamCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { streamCheckEvery = old })
	env := natstest.Start(t)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watchdog{NC: nc, JS: js, Log: logger(t), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the watchdog reading statuses", w.Ready)
	pub := func(server, connector string, ms int64) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: ms, At: time.Now()})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	// Statuses that move the consumer far, of a connector watched for an hour.
	for i := range 20 {
		pub(fmt.Sprintf("old%d", i), "slow", time.Hour.Milliseconds())
	}
	waitFor(t, "the old statuses read", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.servers) == 20
	})

	p.Pause()
	if err := env.JS.DeleteStream(t.Context(), subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), waitLimit)
	err = subjects.EnsureStreams(sctx, env.JS, subjects.StreamOptions{})
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	pub("new", "ghost", beat.Milliseconds()) // sequence 1 of the new stream
	p.Resume()
	waitFor(t, "the status of the new stream declared", func() bool { return last(statuses(t, env, "new")).Code == subjects.CodeConnectorLost })
}
