package liveness

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// steady is the heartbeat period of the connectors of these tests, which check that nothing is
// declared while they beat: longer than beat, so that a loaded machine's hiccup is not silence.
const steady = 100 * time.Millisecond

// startConnectorOn runs a registrysync Manager for server "kb" on nc, beating every steady;
// stop ends it and waits.
func startConnectorOn(t *testing.T, nc *nats.Conn, url string) (stop func()) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := registrysync.New(js, nc, registrysync.Config{
		Servers:        []registrysync.ServerConfig{{Name: "kb", URL: url}},
		HeartbeatEvery: steady, ResyncEvery: -1, PingEvery: -1, DrainTimeout: time.Second,
	}, logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// quiet waits 10 periods of steady (time for any watchdog to declare a silent connector, and
// for any stopped status to land) and returns the statuses of kb published after the first n.
func quiet(t *testing.T, env *natstest.Env, n int) []subjects.Status {
	t.Helper()
	time.Sleep(10 * steady) // nothing should happen: there is no event to wait for
	sts := statuses(t, env, "kb")
	return sts[min(n, len(sts)):]
}

// A rolling restart: the new registrysync starts before the old one stops, both running "kb".
// Whichever of the two stops, the other keeps the server ready: no connector_stopped (the
// stopping one finds the other answering), no connector_lost (the status names a process that
// beats), no flapping between the two.
func TestRollingRestartKeepsServerReady(t *testing.T) {
	for _, stopNew := range []bool{false, true} {
		name := "old stops"
		if stopNew {
			name = "new stops"
		}
		t.Run(name, func(t *testing.T) {
			env := natstest.Start(t)
			url := kbURL(t)
			w := startWatchdog(t, env)
			waitFor(t, "the watchdog reading statuses", w.Ready)
			stopOld := startConnectorOn(t, env.Connect(t), url)
			waitFor(t, "kb ready", func() bool { return last(statuses(t, env, "kb")).Status == subjects.StatusReady })
			old := last(statuses(t, env, "kb")).Connector
			stopNewer := startConnectorOn(t, env.Connect(t), url)
			waitFor(t, "kb ready by the new process", func() bool {
				st := last(statuses(t, env, "kb"))
				return st.Status == subjects.StatusReady && st.Connector != old
			})
			newer := last(statuses(t, env, "kb")).Connector
			n := len(statuses(t, env, "kb"))
			stopping, staying := old, newer
			if stopNew {
				stopNewer()
				stopping, staying = newer, old
			} else {
				stopOld()
			}
			after := quiet(t, env, n)
			for _, st := range after {
				if st.Status != subjects.StatusReady {
					t.Errorf("status published after %s stopped while %s runs kb: %+v", stopping, staying, st)
				}
			}
			if st := last(statuses(t, env, "kb")); st.Status != subjects.StatusReady || st.Connector != staying || st.HeartbeatMs == 0 {
				t.Errorf("last status %+v, want ready naming the process still running (%s) with heartbeats", st, staying)
			}
			if w.Declared() != 0 {
				t.Errorf("%d connector_lost declarations", w.Declared())
			}
		})
	}
}

// A registrysync frozen for a while (SIGSTOP, a stalled VM or network: nothing goes in or out
// of its connection, which NATS keeps) is declared lost, and once it runs again it publishes
// its status again without a restart or a reconnection: the declaration reaches it live.
func TestPausedConnectorComesBack(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	startConnectorOn(t, nc, kbURL(t))
	waitFor(t, "kb ready", func() bool { return last(statuses(t, env, "kb")).Status == subjects.StatusReady })
	id := last(statuses(t, env, "kb")).Connector

	p.Pause()
	waitFor(t, "connector_lost", func() bool { return last(statuses(t, env, "kb")).Code == subjects.CodeConnectorLost })
	if st := last(statuses(t, env, "kb")); st.Connector != id {
		t.Errorf("declaration names %q, want %q", st.Connector, id)
	}
	p.Resume()
	waitFor(t, "ready again", func() bool {
		st := last(statuses(t, env, "kb"))
		return st.Status == subjects.StatusReady && st.Connector == id && st.HeartbeatMs == steady.Milliseconds()
	})
	if r := nc.Stats().Reconnects; r != 0 {
		t.Errorf("%d reconnections: the test meant a connection that stays up", r)
	}
	quiet(t, env, 0)
	if st := last(statuses(t, env, "kb")); st.Status != subjects.StatusReady || st.Connector != id {
		t.Errorf("status after the comeback: %+v", st)
	}
}

// Heartbeat and status timestamps are the sender's clock, which may be far off: the watchdog
// goes by when it received them. A connector whose clock is an hour behind (or ahead) is not
// declared while it beats, and is declared once it stops.
func TestWatchdogIgnoresSenderClocks(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		server, id := "skew"+skew.String(), "conn"+skew.String()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: id, HeartbeatMs: steady.Milliseconds(), At: time.Now().Add(skew)})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(steady)
			defer tick.Stop()
			for {
				hb, _ := json.Marshal(subjects.Heartbeat{V: 1, Type: subjects.EventHeartbeat, Connector: id, EveryMs: steady.Milliseconds(), At: time.Now().Add(skew)})
				env.NC.Publish(subjects.HeartbeatSubject(id), hb)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
		quiet(t, env, 0)
		if st := last(statuses(t, env, server)); st.Code != "" {
			t.Errorf("skew %s: declared while beating: %+v", skew, st)
		}
		cancel()
		wg.Wait()
		waitFor(t, "declared once silent", func() bool { return last(statuses(t, env, server)).Code == subjects.CodeConnectorLost })
	}
}

// A watchdog whose own connection stalls (a network partition of its host that TCP and NATS do
// not notice for minutes: the process runs on, its ticks on time) hears no heartbeat meanwhile.
// It must not take that for every connector's silence: declared over a stalled connection, the
// declarations wait in it and are stored once it flows again, over the statuses of connectors
// that beat all along.
func TestStalledWatchdogDeclaresNothing(t *testing.T) {
	// Shorter than the round trip's timeout (the round trip waits it out), and longer.
	for _, stall := range []time.Duration{10 * steady, rttTimeout + 10*steady} {
		t.Run(stall.String(), func(t *testing.T) { testStalledWatchdog(t, stall) })
	}
}

func testStalledWatchdog(t *testing.T, stall time.Duration) {
	env := natstest.Start(t)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	startConnectorOn(t, env.Connect(t), kbURL(t))
	waitFor(t, "kb ready", func() bool { return last(statuses(t, env, "kb")).Status == subjects.StatusReady })
	n := len(statuses(t, env, "kb"))

	p.Pause()
	time.Sleep(stall) // far more than 3 heartbeat periods
	p.Resume()
	for _, st := range quiet(t, env, n) {
		t.Errorf("status published after the watchdog's connection stalled: %+v", st)
	}
	if d := w.Declared(); d != 0 {
		t.Errorf("%d declarations", d)
	}
}
