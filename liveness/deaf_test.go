package liveness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// A watchdog whose NATS user may not subscribe to the heartbeats (permissions that list what
// an indexer publishes and forget that): NATS refuses the subscription, says so asynchronously,
// and the watchdog hears no heartbeat at all. It took that for every connector's silence and
// declared every server lost, every 3 periods, as often as their registrysync published them
// again. Deaf, it must declare nothing.
func TestRefusedHeartbeatSubscriptionDeclaresNothing(t *testing.T) {
	srv, admin, ajs := startJetStream(t, []*server.User{{Username: "admin", Password: "admin"}, {Username: "watchdog", Password: "watchdog",
		Permissions: &server.Permissions{Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{subjects.HeartbeatAll}}}}})
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("watchdog", "watchdog"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)

	// A connector that beats all along.
	const period = 100 * time.Millisecond
	beatEvery(t, admin, "alive", 20*time.Millisecond, 20)
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
	time.Sleep(20 * period) // nothing should happen: there is no event to wait for
	if d := w.Declared(); d != 0 {
		t.Errorf("a watchdog that hears no heartbeat (its subscription refused) made %d declarations", d)
	}
}

// NATS tells a refused subscription only asynchronously, and the connection keeps only the
// last error it was told: a connection shared with other parts of the process (the indexer's),
// some of whose subscriptions NATS refuses too, hears those refusals after the heartbeats' one
// on a reconnection (which makes every subscription again, in no set order). The watchdog read
// the connection's last error: another subscription's refusal, and took its own subscription
// for heard, and declared every server lost again.
func TestRefusedHeartbeatSubscriptionNotMissedAmongOthers(t *testing.T) {
	srv, admin, ajs := startJetStream(t, []*server.User{{Username: "admin", Password: "admin"}, {Username: "watchdog", Password: "watchdog",
		Permissions: &server.Permissions{Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{subjects.HeartbeatAll, "other.>"}}}}})
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("watchdog", "watchdog"), nats.ReconnectWait(10*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The other refused subscriptions of the process sharing the connection.
	for i := range 20 {
		if _, err := nc.Subscribe(fmt.Sprintf("other.%d", i), func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)

	const period = 100 * time.Millisecond
	beatEvery(t, admin, "alive", 20*time.Millisecond, 20)
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
	for range 3 {
		before := nc.Stats().Reconnects
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.DisconnectClientByID(cid); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reconnection", func() bool { return nc.IsConnected() && nc.Stats().Reconnects > before })
		time.Sleep(10 * period) // nothing should happen: there is no event to wait for
	}
	if d := w.Declared(); d != 0 {
		t.Errorf("a watchdog that hears no heartbeat (its subscription refused, with others) made %d declarations", d)
	}
}

// A watchdog deaf (its subscription refused) until its user may subscribe to the heartbeats
// and it reconnects: the refusal kept in the connection's last error is not taken for the new
// subscription's, and a silent connector is declared again.
func TestRefusedHeartbeatSubscriptionAllowedAfterReconnect(t *testing.T) {
	users := func(deny []string) []*server.User {
		return []*server.User{{Username: "admin", Password: "admin"}, {Username: "watchdog", Password: "watchdog",
			Permissions: &server.Permissions{Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: deny}}}}
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: users([]string{subjects.HeartbeatAll})}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	admin, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(t.Context(), ajs, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("watchdog", "watchdog"), nats.ReconnectWait(10*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	if !errors.Is(nc.LastError(), nats.ErrPermissionViolation) {
		t.Fatalf("the subscription not refused: %v", nc.LastError())
	}

	reload := *opts
	reload.Port = srv.Addr().(*net.TCPAddr).Port
	reload.Users = users(nil)
	if err := srv.ReloadOptions(&reload); err != nil {
		t.Fatal(err)
	}
	before := nc.Stats().Reconnects
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reconnection", func() bool { return nc.IsConnected() && nc.Stats().Reconnects > before })
	data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "orphan", Status: subjects.StatusReady,
		Connector: "ghost", HeartbeatMs: 100, At: time.Now()})
	if _, err := ajs.Publish(t.Context(), subjects.RegistryStatus("orphan"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "orphan declared", func() bool { return w.Declared() == 1 })
}
