package executor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// An executor that drops its registry view to replay the stream (purged: see registry.follow)
// holds, while the replay runs, the stream's first events without the later ones: a tool
// listed, then revoked, was fresh again between its snapshot and its revocation, and a call
// taken then ran it (a revoked tool executed). Calls wait for the replay to catch up with the
// stream as it was when the view was dropped; the revoked tool is then refused stale.
func TestRegistryReplayDoesNotRunRevokedTool(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })

	var snapSeq atomic.Uint64
	var armed atomic.Bool // the live application is over: the next is the replay's
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	t.Cleanup(func() { resumeOnce.Do(func() { close(resume) }) })
	waiting := make(chan struct{}, 1)
	disp := &countDispatcher{}
	hooks := testHooks{
		registryApplied: func(seq uint64) {
			// The snapshot's application once armed is the replay's: it stops there, before
			// the revocation, until the test resumes it.
			if seq == snapSeq.Load() && armed.CompareAndSwap(true, false) {
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
	first := publish(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	snapSeq.Store(publish(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}}))
	publish(subjects.RegistryRevoked("vault"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "vault", Tools: []string{"move"}, Reason: "incident"})
	waitFor(t, "revoked in the executor's view", func() bool { return r.ex.reg.view.Tool("vault", "move").State == staleness.Revoked })
	armed.Store(true)

	// Purged up to vault's status: the executor no longer finds the first event it applied,
	// and replays the stream from vault's status on.
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(first)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-paused:
	case <-ctx.Done():
		t.Fatal("the executor did not replay the purged stream")
	}

	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "mid-replay", Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	waitFor(t, "the call to run or wait for the replay", func() bool {
		select {
		case <-waiting:
			return true
		default:
			return disp.n.Load() > 0
		}
	})
	resumeOnce.Do(func() { close(resume) })
	res := <-done
	if n := disp.n.Load(); n != 0 {
		t.Errorf("the revoked tool was dispatched %d times during the replay: want never", n)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Errorf("answer %s %+v, want refused stale (revoked)", res.Status, res.Error)
	}
}
