package natstest

import (
	"context"
	"os"
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
	return StartWith(t, natsembed.Config{})
}

// StartWith is Start with a server configured as cfg (its StoreDir is the test's temp store):
// a small max_payload, or JetStream storage limits, to see what runs out.
func StartWith(t testing.TB, cfg natsembed.Config) *Env {
	t.Helper()
	dir := t.TempDir()
	cfg.StoreDir = dir
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	e := &Env{Server: srv, URL: srv.ClientURL(), Dir: dir}
	nc := e.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := subjects.EnsureStreams(ctx, js, subjects.StreamOptions{}); err != nil {
		t.Fatalf("streams: %v", err)
	}
	e.NC, e.JS = nc, js
	return e
}

// InProcess is MCPSTREAM_TEST_NATS=inprocess: Connect (and Start's connection) use in-process
// connections to the embedded server, as the roles of mcpstream up do, instead of loopback TCP
// (a separate process's view). For benchmarks of either deployment.
var InProcess = os.Getenv("MCPSTREAM_TEST_NATS") == "inprocess"

// Connect opens another client connection to the test server (see InProcess), closed at cleanup.
func (e *Env) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	var err error
	if InProcess {
		nc, err = e.Server.Connect()
	} else {
		nc, err = nats.Connect(e.URL)
	}
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// InfoThen is a stream whose Info runs Then after reading the stream's info, before returning
// it: what is stored or applied while the answer travels (a test of code that compares the
// info with what it knows).
type InfoThen struct {
	jetstream.Stream
	Then func()
}

// Info reads the stream's info, then runs Then (when the read succeeded).
func (s InfoThen) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	info, err := s.Stream.Info(ctx, opts...)
	if err == nil {
		s.Then()
	}
	return info, err
}
