package indexer

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStopWithNATSDown: a replica serving the catalog service whose NATS server went away (its
// connection reconnecting) stops, with no request in flight, without waiting for the server to
// confirm its subscriptions' drain: it returns before a flush sent on its connection just
// before it was stopped fails (nats.go's 10 s flush timeout). It waited for that confirmation,
// subscription by subscription: in mcpstream up, past the whole --stop-timeout.
func TestStopWithNATSDown(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	nc := env.Connect(t) // default options: reconnects for minutes
	r := startReplica(t, env, "", nil, nc)
	waitSeq(t, r.Catalog, seq)
	client := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := client.Request(subjects.CatalogServers("local"), []byte(`{}`), time.Second)
		return err == nil
	})

	env.Server.Shutdown()
	waitFor(t, "the replica's connection reconnecting", func() bool { return nc.Status() == nats.RECONNECTING })

	flushed := make(chan error, 1)
	go func() { flushed <- nc.Flush() }() // fails once its timeout passes: NATS is away
	stopped := make(chan error, 1)
	r.stopOnce.Do(func() {}) // stopped here, not again at cleanup
	go func() { stopped <- r.stopFn() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("stop: %v", err)
		}
	case err := <-flushed:
		t.Errorf("the replica did not stop before a flush on its connection failed (%v): it waits for NATS to confirm the drain", err)
		<-stopped
	}
}
