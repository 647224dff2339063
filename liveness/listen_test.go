package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The heartbeat subscription is made anew after each reconnection (listen): the one it replaces
// must be dropped (one subscription on the server however many reconnections), and no heartbeat
// of a connector beating all along lost meanwhile (its server never declared), while silent
// connectors are still declared after each reconnection.
func TestHeartbeatSubscriptionMadeAnewAfterReconnects(t *testing.T) {
	srv, admin, ajs := startJetStream(t, nil)
	nc, err := nats.Connect(srv.ClientURL(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)

	const period = 100 * time.Millisecond
	beatEvery(t, admin, "alive", 10*time.Millisecond, 10)
	pub := func(server, connector string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: period.Milliseconds(), At: time.Now()})
		if _, err := ajs.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	pub("served", "alive")
	heartbeatSubs := func() int {
		t.Helper()
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		cz, err := srv.Connz(&server.ConnzOptions{CID: cid, Subscriptions: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range cz.Conns {
			for _, s := range c.Subs {
				if s == subjects.HeartbeatAll {
					n++
				}
			}
		}
		return n
	}
	const rounds = 8
	for i := range rounds {
		before := nc.Stats().Reconnects
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.DisconnectClientByID(cid); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reconnection", func() bool { return nc.IsConnected() && nc.Stats().Reconnects > before })
		// A silent connector: its declaration needs the subscription made anew.
		pub(fmt.Sprintf("ghost%d", i), fmt.Sprintf("ghost%d", i))
		waitFor(t, "the ghost declared", func() bool { return w.Declared() == i+1 })
		if n := heartbeatSubs(); n != 1 {
			t.Errorf("after %d reconnections: %d subscriptions to the heartbeats on the server, want 1", i+1, n)
		}
	}
	if st := last(statusesOn(t, ajs, "served")); st.Code == subjects.CodeConnectorLost {
		t.Errorf("a connector beating all along declared lost across reconnections: %+v", st)
	}
	if d := w.Declared(); d != rounds {
		t.Errorf("%d declarations, want %d (the ghosts)", d, rounds)
	}
}

// statusesOn is statuses with a JetStream context rather than a natstest.Env.
func statusesOn(t *testing.T, js jetstream.JetStream, server string) []subjects.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := js.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []subjects.Status
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		msg, err := m.GetMsg(ctx, seq)
		if err != nil || msg.Subject != subjects.RegistryStatus(server) {
			continue
		}
		var st subjects.Status
		if json.Unmarshal(msg.Data, &st) == nil {
			out = append(out, st)
		}
	}
	return out
}

// noStreamJS is the watchdog's JetStream, whose Stream fails once the test says (NATS slow to
// answer, or the JetStream API away): the read of the registry stream before each batch of
// declarations fails.
type noStreamJS struct {
	jetstream.JetStream
	fail atomic.Bool
}

func (j *noStreamJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if j.fail.Load() {
		return nil, errors.New("test: no stream info")
	}
	return j.JetStream.Stream(ctx, name)
}

// The registry stream read before each batch of declarations (is it still the one the statuses
// were read from?) guards against a stream made again; when it cannot be read, the declarations
// go out all the same (a missing stream refuses them by itself): a silent connector is still
// declared, not skipped for as long as the read fails.
func TestDeclaredWhenStreamUnreadable(t *testing.T) {
	env := natstest.Start(t)
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	njs := &noStreamJS{JetStream: js}
	w := &Watchdog{NC: nc, JS: njs, Log: logger(t), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the watchdog reading statuses", w.Ready)
	data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "orphan", Status: subjects.StatusReady,
		Connector: "ghost", HeartbeatMs: 100, At: time.Now()})
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("orphan"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the status seen", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.servers["orphan"] != nil
	})
	njs.fail.Store(true)
	waitFor(t, "orphan declared", func() bool { return last(statuses(t, env, "orphan")).Code == subjects.CodeConnectorLost })
}

// After a reconnection the heartbeat subscription is made anew at the next check that would
// declare (listen). When the connection stalls then (a partition TCP has not noticed yet), the
// heartbeats of a connector beating all along wait in it, addressed to the subscription the
// NATS client made again on the reconnection. listen dropped that one at once, before the
// server even had the new one: once the connection flowed again, the waiting heartbeats were
// thrown away by the client, its round trips succeeded, and the connector's server was declared
// lost (connector_lost) over a silence that was the watchdog's own.
func TestStallAfterReconnectNoFalseDeclaration(t *testing.T) {
	srv, admin, ajs := startJetStream(t, nil)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect(p.URL(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)

	const period = 100 * time.Millisecond
	beatEvery(t, admin, "alive", 10*time.Millisecond, 10)
	data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "served", Status: subjects.StatusReady,
		Connector: "alive", HeartbeatMs: period.Milliseconds(), At: time.Now()})
	if _, err := ajs.Publish(t.Context(), subjects.RegistryStatus("served"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the status seen", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.servers["served"] != nil
	})
	for range 2 {
		before := nc.Stats().Reconnects
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.DisconnectClientByID(cid); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reconnection", func() bool { return nc.IsConnected() && nc.Stats().Reconnects > before })
		time.Sleep(5 * period) // checks notice the reconnection (nothing due: the connector beats)
		p.Pause()
		time.Sleep(8 * period) // a check finds the connector silent, and makes the subscription anew
		p.Resume()
		time.Sleep(10 * period)
	}
	if d := w.Declared(); d != 0 {
		t.Errorf("a connector beating all along declared lost %d times after a stall following a reconnection", d)
	}
}
