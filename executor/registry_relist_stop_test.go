package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// stoppingRig is a rig whose calls are taken by executor A (one worker; the rig's front end,
// with no workers, answers the callers), which re-lists with rel, the test's, and which the
// test stops while a call waits in it. A's re-list timeout and stop grace outlast the test's
// wait: only the stop can end the call's wait in time. disp counts the dispatches of A and of
// the executor started after it (handOver).
type stoppingRig struct {
	*rig
	a     *Executor
	astop func()
	rel   *gatedRelister
	disp  *countDispatcher
	ctx   context.Context // the test's wait
}

func newStoppingRig(t *testing.T, hooks testHooks) *stoppingRig {
	s := &stoppingRig{rel: &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}, disp: &countDispatcher{}}
	s.rig = startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	s.startExecutor(Config{NoWorkers: true}, s.env.NC) // (the front end)
	a, err := New(s.env.Connect(t), s.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Log: testLogger(t),
		Dispatcher: s.disp, Relister: s.rel, ReconnectGrace: -1, RelistTimeout: 4 * waitLimit, StopGrace: 4 * waitLimit, hooks: hooks}))
	if err != nil {
		t.Fatal(err)
	}
	s.a, s.astop = a, runUntilStopped(t, a)
	waitFor(t, "executor A ready", a.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	s.ctx = ctx
	return s
}

// expired waits until A's view holds vault's list expired.
func (s *stoppingRig) expired(t *testing.T) {
	t.Helper()
	waitFor(t, "vault's list expired in A", func() bool { return s.a.reg.view.Tool("vault", "move").State == staleness.Expired })
}

// asked waits until A asks for a re-list (what: when).
func (s *stoppingRig) asked(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.rel.asked:
	case <-s.ctx.Done():
		t.Fatal("the expired list was not re-listed " + what)
	}
}

// call calls vault__move as id through the front end; the answer comes on the channel
// returned.
func (s *stoppingRig) call(t *testing.T, id string) <-chan subjects.CallResult {
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := s.client.Call(s.ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	return done
}

// approved submits a call of vault__move (destructive: held for approval), answers the re-list
// of its expired list at admission, and approves it once it waits; its id is returned.
func (s *stoppingRig) approved(t *testing.T) string {
	t.Helper()
	id := NewCallID()
	if _, _, err := s.client.Submit(s.ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", TimeoutMs: 2 * waitLimit.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	s.asked(t, "at admission")
	s.rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", ListedAt: time.Now()}
	waitFor(t, "needs_approval", func() bool { return s.approvalWaits(id) > 0 })
	if rep, err := s.client.Decide(s.ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	s.asked(t, "after the approval") // (a TTL of 1 ms)
	return id
}

// waitingFor waits until a call waits in A for the view to apply the stream sequence seq.
func (s *stoppingRig) waitingFor(t *testing.T, seq uint64) {
	t.Helper()
	waitFor(t, "the call waiting for the re-list's snapshot", func() bool {
		s.a.reg.mu.Lock()
		defer s.a.reg.mu.Unlock()
		return len(s.a.reg.waiters[seq]) > 0
	})
}

// handOver stops A while a call waits in it, publishes vault's list fresh (with move's
// annotation) and starts the next executor, whose AckWait is A's: the call reaches it only
// handed back (A's heartbeats hold it while it waits). A's stop returns at once, or, with a
// replay paused, once it is resumed (at cleanup).
func (s *stoppingRig) handOver(t *testing.T, annotation string) {
	t.Helper()
	go s.astop()
	waitFor(t, "executor A stopping", func() bool { return !s.a.Ready() })
	publishVaultTTLAs(s.rig, "f1", time.Hour.Milliseconds(), annotation)
	s.startExecutor(s.managerConfig(Config{FrontEnd: new(bool), Dispatcher: s.disp, ReconnectGrace: -1}), s.env.Connect(t))
}

// wantRunOnce checks that the call handed back was run by the next executor, once.
func (s *stoppingRig) wantRunOnce(t *testing.T, res subjects.CallResult) {
	t.Helper()
	if res.Status != subjects.CallOK || s.disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (handed back, run by the next executor)", res.Status, res.Error, s.disp.n.Load())
	}
}

// answer waits for the answer of a call handed back.
func (s *stoppingRig) answer(t *testing.T, done <-chan subjects.CallResult) subjects.CallResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-s.ctx.Done():
		t.Fatal("no answer: the call waited on in the stopping executor, not handed back")
		return subjects.CallResult{}
	}
}

// awaitApproved waits for the answer of an approved call handed back, and checks that it was
// run once and held for approval once (handBackApproved: nobody asked again).
func (s *stoppingRig) awaitApproved(t *testing.T, id string) {
	t.Helper()
	res, err := s.client.Await(s.ctx, "local", id)
	if err != nil {
		t.Fatalf("no answer: the approved call was not handed back, or its next delivery waited for an answer (%v)", err)
	}
	s.wantRunOnce(t, res)
	if n := s.approvalWaits(id); n != 1 {
		t.Errorf("held for approval %d times, want once", n)
	}
}

const destructive = `"destructiveHint":true`

// A call whose expired list was re-listed while the registry stream was purged waits, at
// admission, for the replay to catch up (registry.toolCaughtUp, in revalidate). When its
// executor stops meanwhile it is handed back, as a call waiting for the replay at admission is:
// another executor runs it. It waited on, blind to the stop, until the re-list's timeout (the
// process's stop held up by it until StopGrace), then was refused unavailable, or was left to
// AckWait with the process gone.
func TestRelistReplayWaitHandedBackWhenExecutorStops(t *testing.T) {
	p := newReplayPause(t)
	s := newStoppingRig(t, p.hooks())
	p.resumeAtCleanup(t) // (after runUntilStopped's)
	// An event before vault's: the executor's origin, purged below.
	s.publishRegistry(subjects.RegistryStatus("pad"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "pad", Status: subjects.StatusReady})
	status, last := publishVaultTTL(s.rig, "f1", 1)
	waitFor(t, "vault__move listed in A", func() bool { return s.a.reg.lookup("vault__move") != nil })
	p.at.Store(status) // the replay stops at vault's status, before its list
	s.expired(t)
	done := s.call(t, "relisted-stopping")
	s.asked(t, "at admission")

	p.replayFrom(s.ctx, t, s.rig, status)
	s.rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", Sequence: last + 1, ListedAt: time.Now()}
	select {
	case <-p.waiting:
	case res := <-done:
		t.Fatalf("answered while the replay was stopped: %s %+v, want the call to wait for the replay", res.Status, res.Error)
	case <-s.ctx.Done():
		t.Fatal("the call did not wait for the replay")
	}
	s.handOver(t, `"readOnlyHint":true`)
	s.wantRunOnce(t, s.answer(t, done))
}

// An approved call whose expired list is re-listed before dispatch (admit's freshness after
// the approval) while the registry stream is purged waits for the replay to catch up; its
// executor stopping then hands it back marked approved (handBackApproved, as approvedCaughtUp
// does): the next executor runs it at once, nobody asked again. It waited on, blind to the
// stop, until the re-list's timeout.
func TestApprovedRelistReplayWaitHandedBackWhenExecutorStops(t *testing.T) {
	p := newReplayPause(t)
	s := newStoppingRig(t, p.hooks())
	p.resumeAtCleanup(t) // (after runUntilStopped's)
	s.publishRegistry(subjects.RegistryStatus("pad"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "pad", Status: subjects.StatusReady})
	status, last := publishVaultTTLAs(s.rig, "f1", 1, destructive)
	s.expired(t)
	p.at.Store(status) // the replay stops at vault's status, before its list
	id := s.approved(t)

	p.replayFrom(s.ctx, t, s.rig, status)
	s.rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", Sequence: last + 1, ListedAt: time.Now()}
	select {
	case <-p.waiting:
	case <-s.ctx.Done():
		t.Fatal("the approved call did not wait for the replay")
	}
	s.handOver(t, destructive)
	s.awaitApproved(t, id)
}

// A call whose expired list was re-listed waits, at admission, until the executor applied the
// new list's snapshot (registry.waitAppliedOf, in revalidate): a sequence the registry consumer
// has not reached yet, or never will (a re-list reply is outside input). When its executor
// stops meanwhile it is handed back, as a call waiting for a replay there is: another executor
// runs it. It waited on, blind to the stop, until the re-list's timeout (the process's stop
// held up by it until StopGrace), then was refused unavailable.
func TestRelistAppliedWaitHandedBackWhenExecutorStops(t *testing.T) {
	s := newStoppingRig(t, testHooks{})
	_, last := publishVaultTTL(s.rig, "f1", 1)
	s.expired(t)
	done := s.call(t, "relisted-unapplied-stopping")
	s.asked(t, "at admission")
	// A snapshot sequence far past the stream's: A waits for it until the re-list's timeout.
	far := last + 1_000_000
	s.rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f2", Sequence: far, ListedAt: time.Now()}
	s.waitingFor(t, far)
	s.handOver(t, `"readOnlyHint":true`)
	s.wantRunOnce(t, s.answer(t, done))
}

// An approved call whose expired list is re-listed before dispatch (admit's freshness after
// the approval) waits for the re-list's snapshot to be applied; its executor stopping then
// hands it back marked approved (handBackApproved): the next executor runs it at once, nobody
// asked again. It waited on, blind to the stop, until the re-list's timeout.
func TestApprovedRelistAppliedWaitHandedBackWhenExecutorStops(t *testing.T) {
	s := newStoppingRig(t, testHooks{})
	_, last := publishVaultTTLAs(s.rig, "f1", 1, destructive)
	s.expired(t)
	id := s.approved(t)
	far := last + 1_000_000 // a snapshot sequence far past the stream's
	s.rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f2", Sequence: far, ListedAt: time.Now()}
	s.waitingFor(t, far)
	s.handOver(t, destructive)
	s.awaitApproved(t, id)
}
