package executor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })

	var firstSeq atomic.Uint64
	var armed atomic.Bool // the live application is over: the next is the replay's
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	disp := &countDispatcher{}
	hooks := testHooks{registryApplied: func(seq uint64) {
		// The replay's first application: its consumer was handed its first batch of
		// messages, not yet the rest. It waits there until the tail is deleted.
		if seq == firstSeq.Load() && armed.CompareAndSwap(true, false) {
			close(paused)
			<-resume
		}
	}}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, hooks: hooks}})
	// (after startRig's: cleanups run last first, and the executor's Run waits for its replay)
	t.Cleanup(func() { resumeOnce.Do(func() { close(resume) }) })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	publish := func(subject string, v any) uint64 {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := r.env.JS.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	firstSeq.Store(publish(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady}))
	publish(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}})
	// More messages than the consumer is handed at once (jetstream.DefaultMaxMessages), all
	// of one subject: purged by it, they are the tail deleted under the replay.
	filler, err := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "filler", Status: subjects.StatusReady})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 3 * jetstream.DefaultMaxMessages {
		last = publish(subjects.RegistryStatus("filler"), json.RawMessage(filler))
	}
	waitFor(t, "the executor to apply the stream", func() bool { return r.ex.reg.applied.Load() >= last })
	armed.Store(true)

	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(firstSeq.Load())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-paused:
	case <-ctx.Done():
		t.Fatal("the executor did not replay the purged stream")
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subjects.RegistryStatus("filler"))); err != nil {
		t.Fatal(err)
	}
	resumeOnce.Do(func() { close(resume) })

	res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "after-replay", Tool: "vault__move", TimeoutMs: 3000, Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (the replay reached what the stream holds)", res.Status, res.Error, disp.n.Load())
	}
}
