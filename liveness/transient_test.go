package liveness

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// The status consumer tries once to make itself again (MaxResetAttempts 1) and follow's loop
// takes over: the ordinary transient events it used to ride through itself — its consumer
// deleted by the server (the inactivity threshold, an operator), NATS restarted (a reconnect,
// JetStream recovering its store meanwhile) — end with the watchdog following the statuses
// again, and no connector_lost for a server whose connector beats all along.
func TestWatchdogFollowsAcrossTransients(t *testing.T) {
	dir := t.TempDir()
	start := func(listen string) *natsembed.Server {
		srv, err := natsembed.Start(natsembed.Config{StoreDir: dir, Listen: listen})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start("127.0.0.1:0")
	t.Cleanup(func() { srv.Shutdown() })
	addr := srv.Inner().Addr().(*net.TCPAddr)
	listen := addr.String()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin := connect()
	ajs, _ := jetstream.New(admin)
	{
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		if err := subjects.EnsureStreams(ctx, ajs, subjects.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	// A connector that beats all along, on a connection of its own that reconnects.
	beater := connect()
	stopBeats := make(chan struct{})
	var beating sync.WaitGroup
	beating.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopBeats:
				return
			case <-tick.C:
				beater.Publish(subjects.HeartbeatSubject("c1"), []byte("{}"))
			}
		}
	})
	defer func() { close(stopBeats); beating.Wait() }()
	publish := func(server, connector string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: 100, At: time.Now()})
		for i := 0; ; i++ { // JetStream may be recovering its store after a restart
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := ajs.Publish(ctx, subjects.RegistryStatus(server), data)
			cancel()
			if err == nil {
				return
			}
			if i == 100 {
				t.Fatalf("publish status: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	publish("kb", "c1")

	var logs syncBuffer
	wnc := connect()
	wjs, _ := jetstream.New(wnc)
	w := &Watchdog{NC: wnc, JS: wjs, Log: zerolog.New(&logs), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { w.Run(ctx) })
	defer func() { cancel(); running.Wait() }()
	waitFor(t, "the watchdog following the statuses", w.Ready)
	follows := func(server, connector string) func() bool {
		return func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			s := w.servers[server]
			return s != nil && s.st.Connector == connector
		}
	}
	waitFor(t, "kb watched", follows("kb", "c1"))

	// 1. The consumer deleted by the server.
	{
		lctx, lcancel := context.WithTimeout(context.Background(), waitLimit)
		s, err := ajs.Stream(lctx, subjects.RegistryStream)
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.ConsumerNames(lctx).Name() {
			if err := s.DeleteConsumer(lctx, name); err != nil {
				t.Fatal(err)
			}
		}
		lcancel()
	}
	publish("a", "c1")
	waitFor(t, "a status after the consumer was deleted", follows("a", "c1"))

	// 2. NATS restarted on its store and port.
	srv.Shutdown()
	srv = start(listen)
	waitFor(t, "the watchdog reconnected", wnc.IsConnected)
	publish("b", "c1")
	waitFor(t, "a status after NATS restarted", follows("b", "c1"))
	// Three heartbeat periods and more: still nothing declared for the servers of c1.
	deadline := time.Now().Add(10 * 100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := w.Declared(); n > 0 {
			t.Fatalf("%d connector_lost declared for servers whose connector beats", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("consumer failures logged: %v", logs.retries(t))
}
