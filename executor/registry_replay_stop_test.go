package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// An approved side-effecting call that waits, claimed and holding its slot, for the registry
// view to catch up with a stream purged while it waited for its slot (registry.heldCaughtUp)
// when its executor stops is
// answered at once, nothing sent. It waited on, past the executor's StopGrace, up to its whole
// timeout: the process gone meanwhile, its claim was left without an answer, and the call,
// never sent, was answered outcome_unknown (it may have run).
func TestReplayWaitEndsWhenExecutorStops(t *testing.T) {
	p := newReplayPause(t)
	busy := make(chan struct{}, 1)
	hooks := p.hooks()
	hooks.slotBusy = func(string) {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	disp := &countDispatcher{}
	limits := Limits{Tools: map[string]Rate{"vault__move": {Concurrency: 1}}}
	r, _, astop, first := startReplayingA(t, p, Config{Dispatcher: disp, Limits: limits, hooks: hooks})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

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
	p.replayFrom(ctx, t, r, first)
	held.release(ctx) // the call takes the slot, its claim, and waits for the replay to dispatch
	select {
	case <-p.waiting:
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
	p := newReplayPause(t)
	disp := &countDispatcher{}
	r, a, astop, first := startReplayingA(t, p, Config{Dispatcher: disp, hooks: p.hooks()})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	p.replayFrom(ctx, t, r, first)
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-p.waiting:
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

// startReplayingA starts a rig whose calls are taken by executor A alone (one worker, with
// cfg's dispatcher, limits and hooks: p's among them), vault__move listed in A's view. Once p
// is armed, A's replay pauses at vault's list, followed by an event: the replay paused there
// has not reached the stream's end. It returns the rig, A, what stops A, and vault's status
// (to purge up to).
func startReplayingA(t *testing.T, p *replayPause, cfg Config) (r *rig, a *Executor, astop func(), first uint64) {
	t.Helper()
	r = startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{NoWorkers: true}, r.env.NC)
	cfg.Workers, cfg.FrontEnd, cfg.Log = 1, new(bool), testLogger(t)
	a, err := New(r.env.Connect(t), r.managerConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	astop = runUntilStopped(t, a)
	p.resumeAtCleanup(t) // (after runUntilStopped's)
	waitFor(t, "executor A ready", a.Ready)
	first, snap := publishVaultMove(r, `"destructiveHint":true`)
	p.at.Store(snap)
	r.publishRegistry(subjects.RegistryStatus("other"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "other", Status: subjects.StatusReady})
	waitFor(t, "vault__move listed", func() bool { return a.reg.lookup("vault__move") != nil })
	return r, a, astop, first
}
