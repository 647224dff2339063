package registrysync

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/liveness"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A rolling restart's handover: the stopping process, which the server's status names, probes
// as it stops; the process that answers claims the server (its status naming itself) up to a
// heartbeat period late, later still on a loaded host or with a slow NATS. The stopping
// process stopped its heartbeats before it probed: a claim later than MissedHeartbeats periods
// had a watchdog declare the server lost (connector_lost) while the other process ran it. It
// beats now until the claim lands (here made later than MissedHeartbeats periods).
func TestStoppingProcessBeatsUntilClaimed(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "pair", URL: url})
	cfg.HeartbeatEvery = 100 * time.Millisecond
	a := run(t, nil, cfg)
	w := watchdog(t, a.env.Connect(t))
	rec := record(t, a.env, subjects.RegistryServer("pair"))
	rec.wait(0, "a ready", isStatus(subjects.StatusReady, ""))
	waitUntil(t, "the watchdog reading statuses", w.Ready)
	b := run(t, a.env, cfg)
	bReady := rec.wait(0, "b ready", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) && e.ev.Status.Connector == b.m.id
	})
	delay := (subjects.MissedHeartbeats + 2) * cfg.HeartbeatEvery
	var once sync.Once
	hook := func(string) { once.Do(func() { time.Sleep(delay) }) } // a's claim is late
	a.m.beforeClaim.Store(&hook)
	b.stop(t)
	claimed := rec.wait(bReady.seq, "the claim by a", func(e event) bool {
		return e.ev.Status != nil && e.ev.Status.Connector == a.m.id
	})
	if st := claimed.ev.Status; st.Status != subjects.StatusReady || st.Code != "" {
		t.Errorf("first status after b stopped: %s, want ready naming a", claimed)
	}
	// Time for a declaration, had b gone silent before the claim (there is no event to wait
	// for: nothing should happen).
	time.Sleep(delay)
	for _, e := range rec.all() {
		if e.seq > bReady.seq && e.ev.Status != nil && (e.ev.Status.Code == subjects.CodeConnectorLost || e.ev.Status.Connector != a.m.id) {
			t.Errorf("status published after b stopped while a runs the server: %s (%s)", e, e.ev.Status.Connector)
		}
	}
	if d := w.Declared(); d != 0 {
		t.Errorf("%d connector_lost declarations", d)
	}
}

// watchdog runs a liveness watchdog on nc until the test ends.
func watchdog(t *testing.T, nc *nats.Conn) *liveness.Watchdog {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &liveness.Watchdog{NC: nc, JS: js, Log: testLogger(t), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Errorf("watchdog: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return w
}

// awaitClaims waits only for the servers whose last status names this process (beating): a
// claim comes for those alone. A status naming another process, none, or one not beating (a
// claim is refused then) ends the wait at once, as does NATS going away; the statuses of many
// servers are read by one consumer, and the wait ends once the last of them is claimed.
func TestAwaitClaimsWaitsOnlyForClaimsToCome(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := New(js, nc, Config{HeartbeatEvery: 100 * time.Millisecond}, testLogger(t))
	publish := func(server, connector string, hbMs int64) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server,
			Status: subjects.StatusReady, Connector: connector, HeartbeatMs: hbMs, At: time.Now().UTC()})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	mine := map[string]bool{}
	for i := range n {
		name := "mine" + strconv.Itoa(i)
		publish(name, m.id, 100)
		mine[name] = true
	}
	publish("other", "someone", 100)
	publish("quiet", m.id, 0)
	await := func(servers map[string]bool) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.awaitClaims(context.Background(), servers, time.Hour)
		}()
		return done
	}
	returned := func(done <-chan struct{}) bool {
		select {
		case <-done:
			return true
		case <-time.After(waitLimit):
			return false
		}
	}
	if !returned(await(map[string]bool{"other": true, "none": true, "quiet": true})) {
		t.Fatal("awaitClaims waited for servers whose status does not name this process beating")
	}

	done := await(maps.Clone(mine))
	for i := range n - 1 {
		publish("mine"+strconv.Itoa(i), "someone", 100)
	}
	time.Sleep(200 * time.Millisecond) // nothing should happen: there is no event to wait for
	select {
	case <-done:
		t.Fatal("awaitClaims returned with a server still naming this process")
	default:
	}
	publish("mine"+strconv.Itoa(n-1), "someone", 100)
	if !returned(done) {
		t.Fatal("awaitClaims still waits once every server is claimed")
	}

	publish("mine0", m.id, 100)
	done = await(map[string]bool{"mine0": true})
	time.Sleep(200 * time.Millisecond)
	env.Server.Shutdown() // (the client reconnecting, not closed)
	if !returned(done) {
		t.Fatal("awaitClaims still waits with NATS away")
	}
}
