package indexer

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStopWhileStreamMissing: the registry stream deleted and not made again (an operator's
// `nats stream rm`, NATS restarted without its store): the replica's ordered consumer tries to
// make itself again, for good and watching no context, inside Next. The context passed to Next
// does not end that; only the iterator's Stop does (its next try sees it stopped). A stop
// (SIGTERM) must not wait for the stream to come back.
func TestStopWhileStreamMissing(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	c, err := Open(Config{InMemory: true, Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followErr := make(chan error, 1)
	go func() { followErr <- c.Follow(ctx, env.JS) }()
	waitSeq(t, c, seq)
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if err := env.JS.DeleteStream(dctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	// Time for the consumer's deletion to reach the replica, and its first tries to make it
	// again to fail (the tries go on whatever the wait).
	time.Sleep(1500 * time.Millisecond)
	cancel()
	select {
	case err := <-followErr:
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(60 * time.Second): // nats.go's tries back off to 10 s: far more than one
		t.Fatal("Follow did not return after its context ended, the registry stream missing")
	}
}
