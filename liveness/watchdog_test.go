package liveness

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// waitLimit bounds every wait: a test fails only if the thing never happens.
const waitLimit = 30 * time.Second

const beat = 50 * time.Millisecond

func logger(t *testing.T) zerolog.Logger {
	if os.Getenv("MCPSTREAM_TEST_DEBUG") != "" {
		return zerolog.New(zerolog.NewTestWriter(t))
	}
	return zerolog.Nop()
}

// kbURL serves the kb demo server over streamable HTTP on loopback.
func kbURL(t *testing.T) string {
	t.Helper()
	h, err := demoservers.Handler(t.Context(), "kb", demoservers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// connector runs a registrysync Manager for server "kb" on its own NATS connection, which the
// test may close to make the process fall silent as a killed one does.
type connector struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

func startConnector(t *testing.T, env *natstest.Env, url string) *connector {
	t.Helper()
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := registrysync.New(js, nc, registrysync.Config{
		Servers:        []registrysync.ServerConfig{{Name: "kb", URL: url}},
		HeartbeatEvery: beat, ResyncEvery: -1, PingEvery: -1, DrainTimeout: time.Second,
	}, logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	c := &connector{nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

func startWatchdog(t *testing.T, env *natstest.Env) *Watchdog {
	t.Helper()
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watchdog{NC: nc, JS: js, Log: logger(t), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return w
}

// runWatchdog runs a watchdog on nc (checking every 20 ms) until the test ends.
func runWatchdog(t *testing.T, nc *nats.Conn) *Watchdog {
	t.Helper()
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
	return w
}

// beatEvery publishes heartbeats of connector on nc, every period, saying everyMs, until stop is
// called or the test ends.
func beatEvery(t *testing.T, nc *nats.Conn, connector string, period time.Duration, everyMs int64) (stop func()) {
	t.Helper()
	beating, stopBeating := context.WithCancel(context.Background())
	var beats sync.WaitGroup
	beats.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			data, _ := json.Marshal(subjects.Heartbeat{V: 1, Type: subjects.EventHeartbeat, Connector: connector, EveryMs: everyMs, At: time.Now()})
			_ = nc.Publish(subjects.HeartbeatSubject(connector), data)
			select {
			case <-beating.Done():
				return
			case <-tick.C:
			}
		}
	})
	stop = func() {
		stopBeating()
		beats.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// statuses returns every status event of server on the stream, in order.
func statuses(t *testing.T, env *natstest.Env, server string) []subjects.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []subjects.Status
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil || m.Subject != subjects.RegistryStatus(server) {
			continue
		}
		var st subjects.Status
		if json.Unmarshal(m.Data, &st) == nil {
			out = append(out, st)
		}
	}
	return out
}

func last(sts []subjects.Status) subjects.Status {
	if len(sts) == 0 {
		return subjects.Status{}
	}
	return sts[len(sts)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A registrysync that falls silent (its connection gone, as when it is killed) has its server
// declared unavailable (connector_lost) once, however many watchdogs watch; a connector that
// comes back publishes its status again.
func TestSilentConnectorDeclaredLost(t *testing.T) {
	env := natstest.Start(t)
	url := kbURL(t)
	w1, w2 := startWatchdog(t, env), startWatchdog(t, env)
	c := startConnector(t, env, url)
	waitFor(t, "kb ready with heartbeats", func() bool {
		st := last(statuses(t, env, "kb"))
		return st.Status == subjects.StatusReady && st.Connector != "" && st.HeartbeatMs == beat.Milliseconds()
	})
	ready := last(statuses(t, env, "kb"))

	c.nc.Close() // no goodbye: what a SIGKILL looks like from NATS
	waitFor(t, "connector_lost", func() bool { return last(statuses(t, env, "kb")).Code == subjects.CodeConnectorLost })
	lost := last(statuses(t, env, "kb"))
	if lost.Status != subjects.StatusUnavailable || lost.Connector != ready.Connector || lost.HeartbeatMs != 0 || lost.Transport != ready.Transport {
		t.Errorf("declaration = %+v", lost)
	}
	// Let both watchdogs run a while more: still one declaration.
	time.Sleep(20 * beat)
	n := 0
	for _, st := range statuses(t, env, "kb") {
		if st.Code == subjects.CodeConnectorLost {
			n++
		}
	}
	if n != 1 || w1.Declared()+w2.Declared() != 1 {
		t.Errorf("%d connector_lost events stored, watchdogs report %d+%d, want exactly one", n, w1.Declared(), w2.Declared())
	}

	// A new process for the same server: ready again, and watched again.
	c2 := startConnector(t, env, url)
	waitFor(t, "ready again", func() bool {
		st := last(statuses(t, env, "kb"))
		return st.Status == subjects.StatusReady && st.Connector != ready.Connector
	})
	time.Sleep(20 * beat)
	if st := last(statuses(t, env, "kb")); st.Status != subjects.StatusReady {
		t.Errorf("a beating connector was declared: %+v", st)
	}
	c2.nc.Close()
	waitFor(t, "the second connector lost", func() bool { return last(statuses(t, env, "kb")).Code == subjects.CodeConnectorLost })
}

// A process that is running but was declared lost (cut off for a while) publishes its status
// again on seeing the declaration.
func TestDeclaredButRunningReclaims(t *testing.T) {
	env := natstest.Start(t)
	startConnector(t, env, kbURL(t))
	waitFor(t, "kb ready", func() bool { return last(statuses(t, env, "kb")).Status == subjects.StatusReady })
	ready := last(statuses(t, env, "kb"))
	forged := ready
	forged.Status, forged.Code, forged.HeartbeatMs = subjects.StatusUnavailable, subjects.CodeConnectorLost, 0
	data, _ := json.Marshal(forged)
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("kb"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready again", func() bool {
		sts := statuses(t, env, "kb")
		return len(sts) >= 2 && sts[len(sts)-2].Code == subjects.CodeConnectorLost && last(sts).Status == subjects.StatusReady
	})
}

// Statuses without heartbeats (an older registrysync, or a stopped one) are never declared.
func TestStatusWithoutHeartbeatNotWatched(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	for _, st := range []subjects.Status{
		{V: 1, Type: subjects.EventStatus, Server: "old", Status: subjects.StatusReady, At: time.Now()},
		{V: 1, Type: subjects.EventStatus, Server: "stopped", Status: subjects.StatusUnavailable, Code: subjects.CodeConnectorStopped, Connector: "x", At: time.Now()},
	} {
		data, _ := json.Marshal(st)
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(st.Server), data); err != nil {
			t.Fatal(err)
		}
	}
	// A watched one, so that the wait below is known to be long enough to declare.
	data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "beating", Status: subjects.StatusReady,
		Connector: "gone", HeartbeatMs: beat.Milliseconds(), At: time.Now()})
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("beating"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watched one declared", func() bool { return last(statuses(t, env, "beating")).Code == subjects.CodeConnectorLost })
	for _, s := range []string{"old", "stopped"} {
		if sts := statuses(t, env, s); len(sts) != 1 {
			t.Errorf("%s: %d statuses, want only the one published: %+v", s, len(sts), sts)
		}
	}
	if w.Declared() != 1 {
		t.Errorf("declared %d, want 1", w.Declared())
	}
}
