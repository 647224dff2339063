package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsFollowStreamRecreated: `events --follow` while the stream is deleted and made again
// (its connection stalled meanwhile, so the ordered consumer makes itself again on the new
// stream, from the sequence after the last it read: it waited there, silent, for events the new
// stream may never reach, and skipped those before). It now ends with an error that says so.
// And a Ctrl-C while the stream is missing ends it at once, not after nats.go's tries to make
// the consumer again (which watch no context).
func TestEventsFollowStreamRecreated(t *testing.T) {
	old := followStreamCheckEvery
	followStreamCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { followStreamCheckEvery = old })
	env := natstest.Start(t)
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ev := []byte(`{"v":1,"type":"status","server":"kb","status":"ready","at":"2026-03-01T12:00:00Z"}`)
	for range 5 {
		publish(t, env.JS, subjects.RegistryStatus("kb"), ev)
	}
	var read atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- readStream(context.Background(), js, subjects.RegistryStream, jetstream.OrderedConsumerConfig{}, true, func(jetstream.Msg) error {
			read.Add(1)
			return nil
		})
	}()
	for i := 0; read.Load() < 5; i++ {
		if i > 2000 {
			t.Fatal("the 5 events not read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	publish(t, env.JS, subjects.RegistryStatus("kb"), ev)
	p.Resume()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "made again") {
			t.Fatalf("follow ended with %v, want the stream made again", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("follow still running, %d events read: the new stream not noticed", read.Load())
	}
}
