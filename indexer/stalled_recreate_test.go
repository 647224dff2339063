package indexer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStreamRecreatedWhileStalled: the registry stream deleted and made again while the
// replica's connection stalls (a partition TCP has not noticed; here a paused proxy). Once the
// connection flows again, the replica's ordered consumer makes itself again on the new stream
// from the sequence after the last it read, and waits there; the origin check sees the new
// stream and stopped the iterator, but nats.go's Stop does not end a Next while the ordered
// consumer makes itself again: the replica kept the old stream's catalog for good (and its
// stop could hang the same way). It now starts over and holds what a replica built now holds.
func TestStreamRecreatedWhileStalled(t *testing.T) {
	old := originCheckEvery
	originCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { originCheckEvery = old }) // registered first: runs after the replicas stopped
	env := natstest.Start(t)
	for round := range 5 { // the race is the consumer's reset against the origin check's
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
		seq := publish(t, env.JS, demoEvents(t)...)
		running := startReplicaOn(t, env, js)
		waitSeq(t, running.Catalog, seq)

		p.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
			t.Fatal(err)
		}
		if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		cancel()
		seq = publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
		p.Resume()
		fresh := startReplica(t, env, "", nil, nil)
		waitSeq(t, fresh.Catalog, seq)
		want := digestOf(t, fresh.Catalog)
		waitFor(t, "the stalled replica to hold what a replica built now holds", func() bool {
			return running.Seq() >= seq && running.Ready() && digestOf(t, running.Catalog) == want
		})
		running.stop(t)
		fresh.stop(t)
		t.Logf("round %d ok", round)
	}
}
