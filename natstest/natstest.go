package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// Env is one test's JetStream server and a client connection to it.
type Env struct {
	Server *natsembed.Server
	URL    string // nats://127.0.0.1:port
	NC     *nats.Conn
	JS     jetstream.JetStream
	Dir    string
}

// Start starts a server with a temp store, declares mcpstream's streams, and registers cleanup.
func Start(t testing.TB) *Env {
	t.Helper()
	dir := t.TempDir()
	srv, err := natsembed.Start(natsembed.Config{StoreDir: dir})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := subjects.EnsureStreams(ctx, js, subjects.StreamOptions{}); err != nil {
		t.Fatalf("streams: %v", err)
	}
	return &Env{Server: srv, URL: srv.ClientURL(), NC: nc, JS: js, Dir: dir}
}

// Connect opens another client connection to the test server, closed at cleanup.
func (e *Env) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(e.URL)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
