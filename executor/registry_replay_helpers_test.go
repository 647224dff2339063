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

// replayPause stops an executor's replay of the purged registry stream (registry.follow) once
// it applied one event, until the test resumes it: the test acts while the executor's view is
// part way through the replay.
type replayPause struct {
	at      atomic.Uint64 // the stream sequence of the event the replay stops after
	armed   atomic.Bool   // the live application is over: the next is the replay's
	paused  chan struct{} // closed once the replay stopped
	resume  chan struct{}
	once    sync.Once
	waiting chan struct{} // fed when a call waits for the view to catch up (registryWait)
}

// newReplayPause shortens registryInfoEvery (restored at cleanup), so that the executor notices
// the purge soon.
func newReplayPause(t *testing.T) *replayPause {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })
	return &replayPause{paused: make(chan struct{}), resume: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

// hooks are the executor's hooks that pause the replay and report the calls that wait for it; a
// test sets its other hooks on the copy returned.
func (p *replayPause) hooks() testHooks {
	return testHooks{
		registryApplied: func(seq uint64) {
			if seq == p.at.Load() && p.armed.CompareAndSwap(true, false) {
				close(p.paused)
				<-p.resume
			}
		},
		registryWait: func() {
			select {
			case p.waiting <- struct{}{}:
			default:
			}
		},
	}
}

// resumeAtCleanup resumes the replay at cleanup. Registered after the executor's start:
// cleanups run last first, and the executor's Run waits for its replay.
func (p *replayPause) resumeAtCleanup(t *testing.T) { t.Cleanup(p.resumeReplay) }

func (p *replayPause) resumeReplay() { p.once.Do(func() { close(p.resume) }) }

// replayFrom arms the pause, purges the registry stream up to seq (the executor no longer finds
// the first event it applied, and replays the stream from seq on), and waits until the replay
// stopped.
func (p *replayPause) replayFrom(ctx context.Context, t *testing.T, r *rig, seq uint64) {
	t.Helper()
	p.armed.Store(true)
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(seq)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.paused:
	case <-ctx.Done():
		t.Fatal("the executor did not replay the purged stream")
	}
}

// publishVaultMove publishes server vault ready, then its list: one tool, move, with the
// annotation given (`"readOnlyHint":true`, say). It returns both events' stream sequences.
func publishVaultMove(r *rig, annotation string) (status, snapshot uint64) {
	r.t.Helper()
	status = r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	snapshot = r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{` + annotation + `}}`)}})
	return status, snapshot
}
