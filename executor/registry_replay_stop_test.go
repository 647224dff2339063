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

// An approved side-effecting call that waits, claimed and holding its slot, for the registry
// view to catch up with a stream purged while it waited for its slot (registry.heldCaughtUp)
// when its executor stops is
// answered at once, nothing sent. It waited on, past the executor's StopGrace, up to its whole
// timeout: the process gone meanwhile, its claim was left without an answer, and the call,
// never sent, was answered outcome_unknown (it may have run).
func TestReplayWaitEndsWhenExecutorStops(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })

	var snapSeq atomic.Uint64
	var armed atomic.Bool // the live application is over: the next is the replay's
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	waiting := make(chan struct{}, 1)
	busy := make(chan struct{}, 1)
	hooks := testHooks{
		slotBusy: func(string) {
			select {
			case busy <- struct{}{}:
			default:
			}
		},
		registryApplied: func(seq uint64) {
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
	disp := &countDispatcher{}
	limits := Limits{Tools: map[string]Rate{"vault__move": {Concurrency: 1}}}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Dispatcher: disp, Limits: limits, Log: testLogger(t), hooks: hooks}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	// (after runUntilStopped's: cleanups run last first, and A's Run waits for its replay)
	t.Cleanup(func() { resumeOnce.Do(func() { close(resume) }) })
	waitFor(t, "executor A ready", a.Ready)
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
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)}}))
	// (an event after the snapshot: the replay paused there has not reached the stream's end)
	publish(subjects.RegistryStatus("other"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "other", Status: subjects.StatusReady})
	waitFor(t, "vault__move listed", func() bool { return a.reg.lookup("vault__move") != nil })

	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "vault__move", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}

	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for its slot")
	}
	// Purged while the call waits for its slot: A replays the stream, and stays part way.
	armed.Store(true)
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
		t.Fatal("executor A did not replay the purged stream")
	}
	held.release(ctx) // the call takes the slot, its claim, and waits for the replay to dispatch
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for the replay")
	}
	go astop() // (returns once the replay is resumed, at cleanup)

	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatalf("no answer once executor A stopped: %v", err)
	}
	if n := disp.n.Load(); n != 0 {
		t.Errorf("dispatched %d times from a view part way through its replay: want never", n)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Errorf("answer %s %+v, want refused unavailable (nothing sent)", res.Status, res.Error)
	}
}

// A call approved while its executor replays the purged registry stream waits for the replay
// (approvedCaughtUp); the executor stopping then hands it back, marked so that the next
// delivery goes on as approved at once: another executor runs it, nobody asked again.
func TestApprovedReplayWaitHandedBackWhenExecutorStops(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })

	var snapSeq atomic.Uint64
	var armed atomic.Bool // the live application is over: the next is the replay's
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	waiting := make(chan struct{}, 1)
	hooks := testHooks{
		registryApplied: func(seq uint64) {
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
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Dispatcher: disp, Log: testLogger(t), hooks: hooks}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	// (after runUntilStopped's: cleanups run last first, and A's Run waits for its replay)
	t.Cleanup(func() { resumeOnce.Do(func() { close(resume) }) })
	waitFor(t, "executor A ready", a.Ready)
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
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)}}))
	// (an event after the snapshot: the replay paused there has not reached the stream's end)
	publish(subjects.RegistryStatus("other"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "other", Status: subjects.StatusReady})
	waitFor(t, "vault__move listed", func() bool { return a.reg.lookup("vault__move") != nil })

	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	armed.Store(true)
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
		t.Fatal("executor A did not replay the purged stream")
	}
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for the replay")
	}
	go astop() // (returns once the replay is resumed, at cleanup)
	waitFor(t, "executor A stopping", func() bool { return !a.Ready() })
	r.startExecutor(r.managerConfig(Config{AckWait: time.Second, FrontEnd: new(bool), Dispatcher: disp}), r.env.Connect(t))

	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (handed back, run by the next executor)", res.Status, res.Error, disp.n.Load())
	}
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("held for approval %d times, want once", n)
	}
}
