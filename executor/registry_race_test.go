package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// An event stored and applied while the stream's info is read (its sequence past the info's
// last) is no sign of a stream created again: the executor took itself for ahead of the
// stream, dropped its registry view and replayed the stream (every call answered not_found
// meanwhile), on a healthy stream, whenever the 5 s read crossed an event.
func TestRegistryEventAppliedWhileInfoRead(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 20 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	publish := func() uint64 {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "s", Status: subjects.StatusReady, At: time.Now().UTC()})
		ack, err := env.JS.Publish(ctx, subjects.RegistryStatus("s"), data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	publish()
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(testLogger(t))
	const rounds = 5
	n := 0
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	racing := natstest.InfoThen{Stream: st, Then: func() {
		if n++; n > rounds {
			rcancel()
			return
		}
		seq := publish()
		waitFor(t, "the event stored while the info is read to be applied", func() bool { return r.applied.Load() >= seq })
	}}
	var ready sync.Once
	lost, why, err := r.replay(rctx, racing, st.CachedInfo(), func() { ready.Do(func() {}) })
	if err != nil {
		t.Fatal(err)
	}
	if lost != nil {
		t.Fatalf("after %d reads of the stream's info, each crossing an event: replay ended (%s) on a healthy stream", n, why)
	}
}
