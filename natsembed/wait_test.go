package natsembed

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A server that is not ready (here: one that looks so, as while JetStream recovers a large
// store before it listens) is waited for while ctx lasts, with Waiting called as the wait goes
// on, and a stop ends the wait at once. Before, Start waited a fixed ReadyWait with no way to
// stop it and nothing said: up failed after 10 s on a large store still recovering, and never
// started on it.
func TestStartContextWaitsAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port to name, then free for the server
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	defer func(d time.Duration, r func(*server.Server, time.Duration) bool) { waitingEvery, ready = d, r }(waitingEvery, ready)
	waitingEvery = 100 * time.Millisecond
	ready = func(_ *server.Server, d time.Duration) bool { time.Sleep(d); return false }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		srv, err := StartContext(ctx, Config{StoreDir: t.TempDir(), Listen: addr, ReadyWait: time.Hour,
			Waiting: func(time.Duration) {
				if calls.Add(1) == 2 {
					cancel()
				}
			}})
		if srv != nil {
			srv.Shutdown()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotReady) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want ErrNotReady wrapping context.Canceled", err)
		}
		if strings.Contains(err.Error(), "in use") {
			t.Errorf("a stop while starting is blamed on the port: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("StartContext did not return within 30s of its context ending")
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("Waiting called %d times, want at least 2", n)
	}

	// ReadyWait still bounds the wait. The server was slow, and its port free: the wait is not
	// blamed on the port (it said "is <address> in use?"; nats-server reports a port in use at
	// once, and StartContext says so then: TestStartContextPortInUseFailsAtOnce).
	_, err = StartContext(context.Background(), Config{StoreDir: t.TempDir(), Listen: addr, ReadyWait: 300 * time.Millisecond})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "after 300ms") || strings.Contains(err.Error(), "in use") {
		t.Fatalf("got %v, want ErrNotReady after ReadyWait, not blamed on the port", err)
	}
}
