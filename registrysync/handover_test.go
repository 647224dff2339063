package registrysync

import (
	"context"
	"encoding/json"
	"errors"
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

// A stopping process hands a server to the process that answers its probe, and beats while it
// waits for the claims. A watchdog's declaration (connector_lost) of a handed server seen in
// that wait was reclaimed by the stopping process itself: it published its own status again,
// "ready" and naming itself, and then stopped beating — the status of a server it no longer
// runs, which only a second declaration undid (or, raced against the other process's own
// reclaim, one that landed last). A stopping process reclaims nothing once it retires its
// servers: the process that answers for them does.
func TestStoppingProcessLeavesDeclarationsToTheOneThatAnswers(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "declared", URL: url}, ServerConfig{Name: "unclaimed", URL: url})
	cfg.HeartbeatEvery = 100 * time.Millisecond
	a := run(t, nil, cfg)
	rec := record(t, a.env, subjects.RegistryAll)
	var ready event // declared's
	for _, name := range []string{"declared", "unclaimed"} {
		e := rec.wait(0, name+" ready", func(e event) bool {
			return e.subject.Server == name && isStatus(subjects.StatusReady, "")(e)
		})
		if name == "declared" {
			ready = e
		}
	}
	// Another "process" answers the probes (standing for one whose claim of "unclaimed" is
	// late, and whose own reclaim of the declaration below lands before a's would), and a
	// watchdog declares "declared" lost once a probed it.
	nc := a.env.Connect(t)
	declared := make(chan uint64, 1)
	answer := func(msg *nats.Msg) {
		_ = msg.Respond([]byte(`{"v":1,"error":{"code":"bad_request","message":"probe"}}`))
		if subjects.Relist("declared") != msg.Subject {
			return
		}
		st := *ready.ev.Status
		st.Status, st.Code, st.HeartbeatMs, st.At = subjects.StatusUnavailable, subjects.CodeConnectorLost, 0, time.Now().UTC()
		data, _ := json.Marshal(st)
		pub := nats.NewMsg(subjects.RegistryStatus("declared"))
		pub.Data = data
		pub.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(ready.seq, 10))
		ack, err := a.env.JS.PublishMsg(context.Background(), pub)
		if err != nil {
			t.Errorf("declaration: %v", err)
			return
		}
		declared <- ack.Sequence
	}
	for _, name := range []string{"declared", "unclaimed"} {
		if _, err := nc.Subscribe(subjects.Relist(name), answer); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	var lost uint64
	select {
	case lost = <-declared:
	default:
		t.Fatal("a did not probe declared")
	}
	if last := lastSeq(t, a.env, subjects.RegistryStatus("declared")); last != lost {
		e := rec.wait(lost, "the status after the declaration", func(e event) bool { return e.seq == last })
		t.Errorf("declared's last status is not the declaration #%d but %s (naming %s)", lost, e, e.ev.Status.Connector)
	}
}

// awaitClaims reads the last status of every server (DeliverLastPerSubject), but its ordered
// consumer, made again before it had read them all (deleted, here; or a gap, a missed
// heartbeat), goes on from where it was in the stream's history: an older status of a server,
// one that named another process, came before its last, which names this one, and ended the
// wait for it at once, its claim still to come.
func TestAwaitClaimsReadsTheLastStatusAfterAReset(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := New(js, nc, Config{HeartbeatEvery: 100 * time.Millisecond}, testLogger(t))
	status := func(server, connector string) []byte {
		data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server,
			Status: subjects.StatusReady, Connector: connector, HeartbeatMs: 100, At: time.Now().UTC()})
		return data
	}
	// The statuses of more servers than the consumer's first pull, then the server's older
	// status and its last.
	const n = 1500
	for i := range n {
		name := "other" + strconv.Itoa(i)
		if _, err := env.JS.PublishAsync(subjects.RegistryStatus(name), status(name, "someone")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-env.JS.PublishAsyncComplete():
	case <-time.After(waitLimit):
		t.Fatal("publishing the statuses of other servers")
	}
	for _, connector := range []string{"someone", m.id} {
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("handed"), status("handed", connector)); err != nil {
			t.Fatal(err)
		}
	}
	last := lastSeq(t, env, subjects.RegistryStatus("handed"))
	st, err := env.JS.Stream(t.Context(), subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	deleted := make(chan error, 1)
	hook := func() {
		once.Do(func() { // the consumer deleted once the first status is read
			var err error
			for name := range st.ConsumerNames(context.Background()).Name() {
				err = errors.Join(err, st.DeleteConsumer(context.Background(), name))
			}
			deleted <- err
		})
	}
	m.afterClaimRead.Store(&hook)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.awaitClaims(context.Background(), map[string]bool{"handed": true}, time.Hour)
	}()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("deleting the consumer: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("awaitClaims read no status")
	}
	// The consumer made again delivers the statuses from where the first one was: wait until
	// it has delivered them all.
	waitUntil(t, "the consumer made again delivering every status", func() bool {
		for name := range st.ConsumerNames(t.Context()).Name() {
			if c, err := st.Consumer(t.Context(), name); err == nil && c.CachedInfo().Delivered.Stream >= last {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // nothing should happen: there is no event to wait for
	select {
	case <-done:
		t.Fatal("awaitClaims returned while the server's last status names this process")
	default:
	}
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("handed"), status("handed", "someone")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("awaitClaims still waits once the server is claimed")
	}
}
