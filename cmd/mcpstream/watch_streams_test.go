package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// blindJS answers its first notFound stream lookups "stream not found" (a JetStream that does not
// know its streams yet, as one still recovering), then asks the server; each lookup is counted.
type blindJS struct {
	jetstream.JetStream
	mu       sync.Mutex
	notFound int
	calls    chan struct{}
}

func (j *blindJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	defer func() { j.calls <- struct{}{} }()
	j.mu.Lock()
	blind := j.notFound > 0
	if blind {
		j.notFound--
	}
	j.mu.Unlock()
	if blind {
		return nil, jetstream.ErrStreamNotFound
	}
	return j.JetStream.Stream(ctx, name)
}

// TestWatchStreamsMissingNeedsTime: "missing 3 checks in a row" is there to let a JetStream that
// is still recovering find its streams, which takes time, not checks: a few reconnections in a
// row (a NATS restart's, a flapping link's; a check waiting on the lost connection, a tick and
// the reconnection all come due at once) ran 3 checks within a moment, and a healthy process
// stopped with "stream lost" for a stream that was there.
func TestWatchStreamsMissingNeedsTime(t *testing.T) {
	old := streamCheckEvery
	streamCheckEvery = time.Hour // only reconnections trigger checks here
	t.Cleanup(func() { streamCheckEvery = old })
	env := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	origins := map[string]time.Time{}
	for _, cfg := range subjects.Streams(subjects.StreamOptions{}) {
		s, err := env.JS.Stream(ctx, cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		origins[cfg.Name] = s.CachedInfo().Created
	}
	js := &blindJS{JetStream: env.JS, notFound: streamGoneChecks * len(origins), calls: make(chan struct{}, 64)}
	reconnected := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- watchStreams(ctx, js, origins, reconnected) }()

	// streamGoneChecks reconnections in a row, each one's check done before the next, then one
	// more, once JetStream knows its streams again.
	for round := range streamGoneChecks + 1 {
		reconnected <- struct{}{}
		for range len(origins) {
			select {
			case <-js.calls:
			case err := <-done:
				t.Fatalf("after %d checks in a moment, the watcher gave up on a stream that is there: %v", round+1, err)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watchStreams: %v, want nil", err)
	}
}
