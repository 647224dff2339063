package liveness

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The registry stream deleted while the watchdog follows its statuses (an operator removing it
// to go back to an earlier mcpstream, see README Upgrades; a NATS restarted without its store):
// the status consumer's iterator tried to make its consumer again for as long as the stream was
// missing, deaf to the watchdog's context, so Run never returned and `up` stopped only at its
// --stop-timeout ("role indexer did not stop within 15s", exit status 1), its catalog not
// closed. Run returns once its context ends, stream or not.
func TestRunReturnsWhileRegistryStreamDeleted(t *testing.T) {
	env := natstest.Start(t)
	nc := env.Connect(t)
	w := &Watchdog{NC: nc, JS: env.JS, Log: zerolog.Nop(), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	waitFor(t, "the watchdog following the statuses", w.Ready)
	// The consumer's iterator notices its consumer gone with the stream and makes it again:
	// its requests to JetStream's API, seen here, say when it got there.
	creates := make(chan *nats.Msg, 64)
	watcher := env.Connect(t)
	sub, err := watcher.ChanSubscribe("$JS.API.CONSUMER.CREATE."+subjects.RegistryStream+".>", creates)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The subscription in place at the server before the stream goes: else the watchdog's
	// one quick attempt (its iterator's, told at once of its consumer's deletion) could come
	// first, on another connection, and nothing after it (the stream missing, the watchdog
	// asks for the stream, not for a consumer) would be seen.
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := env.JS.DeleteStream(t.Context(), subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	select {
	case <-creates:
	case <-time.After(30 * time.Second):
		t.Fatal("no attempt to make the status consumer again within 30s of the stream's deletion")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context's end, the registry stream deleted")
	}
}
