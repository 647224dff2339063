package natsembed

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestListenPortZero: port 0 means any free port (as in Go and as `up --nats-listen` says),
// not nats-server's default 4222: two servers on "127.0.0.1:0" both start.
func TestListenPortZero(t *testing.T) {
	ports := map[string]bool{}
	for range 2 {
		srv, err := Start(Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", ReadyWait: 2 * time.Second})
		if err != nil {
			t.Fatalf("Start on 127.0.0.1:0: %v", err)
		}
		t.Cleanup(srv.Shutdown)
		u, err := url.Parse(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		if u.Hostname() != "127.0.0.1" {
			t.Errorf("listening on %s, want 127.0.0.1", u.Host)
		}
		if ports[u.Port()] {
			t.Errorf("two servers on port %s", u.Port())
		}
		ports[u.Port()] = true
	}
}

// TestLimitsAsConfigured: the JetStream limits of Config are the server's; without them,
// nats-server's own (75% of memory and of the free disk, as nats.conf says); max payload and
// max pending are nats.conf's.
func TestLimitsAsConfigured(t *testing.T) {
	want, err := server.ProcessConfigFile("../nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Config{StoreDir: t.TempDir(), Listen: "none", MaxMemory: 64 << 20, MaxStore: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	js := srv.Inner().JetStreamConfig()
	if js == nil {
		t.Fatal("JetStream not enabled")
	}
	if js.MaxMemory != 64<<20 || js.MaxStore != 1<<30 {
		t.Errorf("JetStream max memory, store = %d, %d; want 64 MiB, 1 GiB", js.MaxMemory, js.MaxStore)
	}
	v, err := srv.Inner().Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	if int32(v.MaxPayload) != want.MaxPayload || v.MaxPending != want.MaxPending {
		t.Errorf("max payload, pending = %d, %d; nats.conf says %d, %d",
			v.MaxPayload, v.MaxPending, want.MaxPayload, want.MaxPending)
	}
}

// TestSyncAsConfigured: the fsync period and SyncAlways reach JetStream; the default is
// nats-server's own.
func TestSyncAsConfigured(t *testing.T) {
	for _, c := range []struct {
		cfg          Config
		interval     time.Duration
		always       bool
		intervalDesc string
	}{
		{Config{}, 2 * time.Minute, false, "nats-server's default"},
		{Config{SyncInterval: 5 * time.Second}, 5 * time.Second, false, "5s"},
		{Config{SyncAlways: true}, 2 * time.Minute, true, "always"},
	} {
		c.cfg.StoreDir, c.cfg.Listen = t.TempDir(), "none"
		srv, err := Start(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		js := srv.Inner().JetStreamConfig()
		srv.Shutdown()
		if js == nil {
			t.Fatal("JetStream not enabled")
		}
		if js.SyncInterval != c.interval || js.SyncAlways != c.always {
			t.Errorf("%s: sync interval %s, always %v; want %s, %v", c.intervalDesc, js.SyncInterval, js.SyncAlways, c.interval, c.always)
		}
	}
}

// TestDefaultStoreIsPrivate: with no StoreDir, each server gets its own temporary store; two
// used to share nats-server's fixed <tmp>/nats/jetstream (no lock: one store, two writers).
func TestDefaultStoreIsPrivate(t *testing.T) {
	dirs := map[string]bool{}
	for range 2 {
		srv, err := Start(Config{Listen: "none"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		d := srv.Inner().StoreDir()
		if dirs[d] {
			t.Errorf("two servers share the store %s", d)
		}
		dirs[d] = true
	}
}

// TestShutdownKeepsMessages: what was acknowledged before Shutdown is there after a restart
// on the same store.
func TestShutdownKeepsMessages(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 100
	for round := range 2 {
		srv, err := Start(Config{StoreDir: dir, Listen: "none"})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := js.Publish(ctx, "s.x", []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			st, err := js.Stream(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != n {
				t.Errorf("after restart: %d messages, want %d", info.State.Msgs, n)
			}
		}
		nc.Close()
		srv.Shutdown()
	}
}

// TestNegativeConfigRefused: a negative MaxMemory or MaxStore was silently nats-server's
// default (75% of memory or disk: the opposite of a bound), a negative ReadyWait failed as
// "not ready after -1s", and a negative MaxPayload with a message about max_pending. Each is
// refused by name, before anything starts.
func TestNegativeConfigRefused(t *testing.T) {
	for field, cfg := range map[string]Config{
		"MaxPayload":   {MaxPayload: -1},
		"MaxMemory":    {MaxMemory: -5},
		"MaxStore":     {MaxStore: -5},
		"ReadyWait":    {ReadyWait: -time.Second},
		"SyncInterval": {SyncInterval: -time.Second},
	} {
		cfg.Listen, cfg.StoreDir = "none", t.TempDir()
		srv, err := Start(cfg)
		if err == nil {
			srv.Shutdown()
			t.Errorf("%s: accepted", field)
			continue
		}
		if !strings.Contains(err.Error(), field+" is negative") {
			t.Errorf("%s: %v, want the field named", field, err)
		}
	}
}
