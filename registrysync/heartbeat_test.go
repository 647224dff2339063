package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Heartbeats keep going while a reclaim waits on JetStream. A declaration (connector_lost) made
// the heartbeats goroutine reclaim the server, and that goroutine also sends the heartbeats: a
// reclaim stuck behind the connector's status publish (statusMu, held here as a publish that
// waits up to publishTimeout on a slow JetStream does), or reclaimDeclared reading the last
// status of every server one by one, sent none meanwhile, so that watchdogs declared the
// process's servers lost while it ran them.
func TestHeartbeatsWhileReclaimWaits(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "svc", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("svc"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	var beats atomic.Int64
	sub, err := h.env.NC.Subscribe(subjects.HeartbeatSubject(h.m.id), func(*nats.Msg) { beats.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	waitUntil(t, "a heartbeat", func() bool { return beats.Load() > 0 })

	c := h.m.connector("svc")
	c.statusMu.Lock() // a status publish of the connector's loop, waiting on JetStream
	locked := true
	defer func() {
		if locked {
			c.statusMu.Unlock()
		}
	}()
	st := *ready.ev.Status
	st.Status, st.Code, st.Reason, st.HeartbeatMs = subjects.StatusUnavailable, subjects.CodeConnectorLost, "watchdog", 0
	data, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := h.env.JS.Publish(ctx, subjects.RegistryStatus("svc"), data); err != nil {
		t.Fatal(err)
	}
	lost := rec.wait(ready.seq, "declared", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorLost))
	n := beats.Load()
	waitUntil(t, "heartbeats while the reclaim waits", func() bool { return beats.Load() >= n+5 })

	c.statusMu.Unlock()
	locked = false
	rec.wait(lost.seq, "reclaimed", isStatus(subjects.StatusReady, ""))
}

// gatedJS holds the publishes gate picks until their channel closes.
type gatedJS struct {
	jetstream.JetStream
	gate   func(*nats.Msg) <-chan struct{}
	passed atomic.Int64 // held publishes done
}

func (g *gatedJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if ch := g.gate(msg); ch != nil {
		defer g.passed.Add(1)
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.JetStream.PublishMsg(ctx, msg, opts...)
}

// A server removed while its reclaim (after a connector_lost declaration) is being published
// stays removed. The reclaim read the status (ready) before Remove replaced it and stored it
// after Remove's "removed": the registry then said ready, with heartbeats, for a server nobody
// runs and whose lists were retracted.
func TestRemoveDuringReclaimStaysRemoved(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	env := natstest.Start(t)
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gjs := &gatedJS{JetStream: env.JS, gate: func(msg *nats.Msg) <-chan struct{} {
		if !armed.Load() || msg.Subject != subjects.RegistryStatus("svc") || !bytes.Contains(msg.Data, []byte(`"status":"ready"`)) {
			return nil
		}
		once.Do(func() { close(held) })
		return release
	}}
	defer func() {
		if armed.Swap(false) {
			close(release)
		}
	}()
	cfg := fastConfig(ServerConfig{Name: "svc", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	h := &harness{env: env, m: New(gjs, env.NC, cfg, testLogger(t)), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	rec := record(t, env, subjects.RegistryServer("svc"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	armed.Store(true)
	st := *ready.ev.Status
	st.Status, st.Code, st.Reason, st.HeartbeatMs = subjects.StatusUnavailable, subjects.CodeConnectorLost, "watchdog", 0
	data, _ := json.Marshal(st)
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()
	if _, err := env.JS.Publish(wctx, subjects.RegistryStatus("svc"), data); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-wctx.Done():
		t.Fatal("no reclaim")
	}

	removed := make(chan error, 1)
	go func() { removed <- h.m.Remove(wctx, "svc") }()
	select {
	case err := <-removed: // (Remove does not wait for the reclaim)
		removed <- err
	case <-time.After(time.Second): // (or it does)
	}
	armed.Store(false)
	close(release)
	if err := <-removed; err != nil {
		t.Fatalf("Remove: %v", err)
	}
	rec.wait(ready.seq, "removed", isStatus(subjects.StatusRemoved, ""))
	s, err := env.JS.Stream(wctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reclaim's publish done", func() bool { return gjs.passed.Load() > 0 })
	last, err := s.GetLastMsgForSubject(wctx, subjects.RegistryStatus("svc"))
	if err != nil {
		t.Fatal(err)
	}
	var got subjects.Status
	if err := json.Unmarshal(last.Data, &got); err != nil || got.Status != subjects.StatusRemoved {
		t.Errorf("last status of a removed server: %s %s (%v), want removed", got.Status, got.Code, err)
	}
}
