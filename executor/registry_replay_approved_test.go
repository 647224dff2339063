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

// A call approved while its executor replays the purged registry stream (registry.follow) waits
// for the replay, as a call admitted then does, before the view is read again: it was refused
// from the view part way through, not_found (its server's status replayed, not yet its list),
// the approver's OK thrown away.
func TestApprovedDuringReplayWaitsForIt(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })

	var firstSeq atomic.Uint64
	var armed atomic.Bool // the live application is over: the next is the replay's
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	waiting := make(chan struct{}, 1)
	disp := &countDispatcher{}
	hooks := testHooks{
		registryApplied: func(seq uint64) {
			// The replay stops at vault's status, before its list.
			if seq == firstSeq.Load() && armed.CompareAndSwap(true, false) {
				close(paused)
				<-resume
			}
		},
		registryWait: func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		},
	}
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
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)}})
	r.waitTool("vault__move")

	done := r.approvalCall(ctx, "approved-mid-replay", "vault__move")
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
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "approved-mid-replay", Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-waiting:
	case res := <-done:
		t.Fatalf("answered from the view part way through its replay: %s %+v, want it to wait for the replay", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the approved call neither waited for the replay nor was answered")
	}
	resumeOnce.Do(func() { close(resume) })
	res := <-done
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once", res.Status, res.Error, disp.n.Load())
	}
}
