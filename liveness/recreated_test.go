package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
	w := runWatchdog(t, nc)
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

// The registry stream made again while a silent connector's server is watched, before the
// watchdog notices (it reads the stream's creation time every 5 s): the server's status of the
// old stream was at sequence 21, and on the new stream, whose sequences start over, the
// server's fresh status is at 21 too. The watchdog's declaration expects the last sequence 21
// of the server's subject: the new stream took it, over the fresh status, and the server was
// left unavailable (connector_lost) with its new connector beating. A declaration must go to
// the stream the status it expects was read from.
func TestStreamRecreatedNoDeclarationOverNewStatus(t *testing.T) {
	old := streamCheckEvery
	streamCheckEvery = time.Hour // the 5 s before the watchdog notices, made long
	t.Cleanup(func() { streamCheckEvery = old })
	env := natstest.Start(t)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	pub := func(server, connector string, ms int64) uint64 {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: ms, At: time.Now()})
		ack, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	for i := range 20 {
		pub(fmt.Sprintf("filler%d", i), "slow", time.Hour.Milliseconds())
	}
	oldSeq := pub("x", "ghost", 300) // silent: due 900 ms after it is seen
	waitFor(t, "the old statuses read", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.servers) == 21
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
	for i := range 20 {
		pub(fmt.Sprintf("filler%d", i), "slow", time.Hour.Milliseconds())
	}
	if seq := pub("x", "fresh", time.Hour.Milliseconds()); seq != oldSeq {
		t.Fatalf("x's fresh status at sequence %d, want %d", seq, oldSeq)
	}
	pub("y", "ghost2", 600) // silent too, declared after x would be: the event waited for
	p.Resume()
	waitFor(t, "y declared", func() bool { return last(statuses(t, env, "y")).Code == subjects.CodeConnectorLost })
	if st := last(statuses(t, env, "x")); st.Code == subjects.CodeConnectorLost || st.Connector != "fresh" {
		t.Errorf("x's fresh status on the new stream overwritten by a declaration for the old one: %+v", st)
	}
}
