package executor

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// A replay of the registry stream (purged: see registry.follow) whose last messages are deleted
// after its consumer was handed the ones before them (a confirmation's TTL running out, say)
// is handed no message that says it reached the stream's end: the last one it applies said
// more were pending. The replay still ends, once it applied the last message the stream
// holds. It never did: every call waited its whole timeout and
// was refused unavailable, until the next registry event (hours, maybe).
func TestRegistryReplayEndsWhenItsTailIsDeleted(t *testing.T) {
	p := newReplayPause(t)
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, hooks: p.hooks()}})
	p.resumeAtCleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	first, _ := publishVaultMove(r, `"readOnlyHint":true`)
	// The replay's first application: its consumer was handed its first batch of messages, not
	// yet the rest. It waits there until the tail is deleted.
	p.at.Store(first)
	// More messages than the consumer is handed at once (jetstream.DefaultMaxMessages), all
	// of one subject: purged by it, they are the tail deleted under the replay.
	filler := subjects.Status{V: 1, Type: subjects.EventStatus, Server: "filler", Status: subjects.StatusReady}
	var last uint64
	for range 3 * jetstream.DefaultMaxMessages {
		last = r.publishRegistry(subjects.RegistryStatus("filler"), filler)
	}
	waitFor(t, "the executor to apply the stream", func() bool { return r.ex.reg.applied.Load() >= last })

	p.replayFrom(ctx, t, r, first)
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subjects.RegistryStatus("filler"))); err != nil {
		t.Fatal(err)
	}
	p.resumeReplay()

	res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "after-replay", Tool: "vault__move", TimeoutMs: 3000, Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (the replay reached what the stream holds)", res.Status, res.Error, disp.n.Load())
	}
}
