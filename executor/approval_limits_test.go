package executor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// oneRateWindow is a rate of one call per 10 minutes, and a limiter clock stopped in the middle
// of its current window: every call of a test counts in that one window, whatever the wall
// clock does meanwhile.
func oneRateWindow() (Rate, func() time.Time) {
	rate := Rate{PerSecond: 1.0 / 600, Burst: 1}
	_, w := rate.window()
	at := time.Unix(0, time.Now().UnixNano()/int64(w)*int64(w)+int64(w)/2)
	return rate, func() time.Time { return at }
}

// approvalCall calls tool with id in the background and waits until the call is held in
// needs_approval; its answer comes on the channel.
func (r *rig) approvalCall(ctx context.Context, id, tool string) <-chan subjects.CallResult {
	r.t.Helper()
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: tool})
		if err != nil {
			r.t.Errorf("call %s: %v", id, err)
		}
		done <- res
	}()
	waitFor(r.t, "needs_approval of "+id, func() bool { return r.approvalWaits(id) > 0 })
	return done
}

// TestApprovedCallNotRateLimited: the limits were checked after approval, so an approver was
// told OK for a call then refused rate_limited (another call had taken the rate meanwhile):
// the human's decision was thrown away, and the caller had to retry and an approver to approve
// again. A call that needs approval takes its rates before anyone is asked: once approved it
// runs, and a call the limits refuse is refused at once, without asking anyone.
func TestApprovedCallNotRateLimited(t *testing.T) {
	rate, clock := oneRateWindow()
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Limits: Limits{Tenant: rate}, hooks: testHooks{rateClock: clock}}), r.env.NC)
	r.waitTool("fixture__wipe")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	done := r.approvalCall(ctx, "gated", "fixture__wipe")
	// The tenant's one call of the window is the one waiting for approval.
	if res := r.call("local", "fixture__echo", `{"text":"meanwhile"}`); res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("a call while the tenant's one call of the window waits for approval: %s %+v, want refused rate_limited", res.Status, res.Error)
	}
	rep, err := r.client.Decide(ctx, subjects.Approval{ID: "gated", Approve: true, By: "ops"})
	if err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Errorf("the call its approver was told OK for: %s %+v, want ok", res.Status, res.Error)
	}

	// The window is used up: a call needing approval is refused now, and nobody is asked.
	res := r.call("local", "fixture__wipe", `{}`, func(req *subjects.CallRequest) { req.ID, req.ApprovalTimeoutMs = "over", 3000 })
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs <= 0 {
		t.Errorf("a call needing approval past the rate: %s %+v, want refused rate_limited with retryAfterMs", res.Status, res.Error)
	}
	if n := r.approvalWaits("over"); n != 0 {
		t.Errorf("a call the rate refuses was held for approval %d times, want never", n)
	}
}

// A call that took its rates before its approval wait and does not run gives them back: denied,
// or timed out. One refused needs_approval at once (approvalTimeoutMs -1) takes none.
func TestApprovalNotRunGivesRatesBack(t *testing.T) {
	rate, clock := oneRateWindow()
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Limits: Limits{Tools: map[string]Rate{"fixture__wipe": rate}}, hooks: testHooks{rateClock: clock}}), r.env.NC)
	r.waitTool("fixture__wipe")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	done := r.approvalCall(ctx, "denied", "fixture__wipe")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "denied", Approve: false}); err != nil || !rep.OK {
		t.Fatalf("deny: %+v %v", rep, err)
	}
	if res := <-done; res.Error == nil || res.Error.Code != subjects.CodeDenied {
		t.Fatalf("denied call: %s %+v", res.Status, res.Error)
	}
	if res := r.call("local", "fixture__wipe", `{}`, func(req *subjects.CallRequest) { req.ApprovalTimeoutMs = 100 }); res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout {
		t.Fatalf("call not approved in time: %s %+v, want approval_timeout", res.Status, res.Error)
	}
	if res := r.call("local", "fixture__wipe", `{}`, func(req *subjects.CallRequest) { req.ApprovalTimeoutMs = -1 }); res.Error == nil || res.Error.Code != subjects.CodeNeedsApproval {
		t.Fatalf("call that may not wait: %s %+v, want needs_approval", res.Status, res.Error)
	}

	// The window's one call is still there.
	done = r.approvalCall(ctx, "approved", "fixture__wipe")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "approved", Approve: true}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Errorf("the window's one call, after three that did not run: %s %+v, want ok", res.Status, res.Error)
	}
}

// An approved call whose concurrency cap is full waits for a slot (at most its timeout) instead
// of being refused rate_limited at once: its approver was told OK.
func TestApprovedCallWaitsForSlot(t *testing.T) {
	limits := Limits{Tools: map[string]Rate{"fixture__wipe": {Concurrency: 1}}}
	busy := make(chan string, 8)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Limits: limits, hooks: testHooks{slotBusy: func(id string) { busy <- id }}}), r.env.NC)
	r.waitTool("fixture__wipe")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__wipe", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}

	done := r.approvalCall(ctx, "capped", "fixture__wipe")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "capped", Approve: true}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case id := <-busy:
		if id != "capped" {
			t.Fatalf("waiting for a slot: %q", id)
		}
	case res := <-done:
		t.Fatalf("the approved call was answered while its cap was full: %s %+v, want it to wait for the slot", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the approved call neither waited for a slot nor was answered")
	}
	held.release(ctx)
	if res := <-done; res.Status != subjects.CallOK {
		t.Errorf("the approved call once the slot was free: %s %+v, want ok", res.Status, res.Error)
	}
}

// An approved call waiting for a concurrency slot holds its worker as a call waiting for
// approval does: it counts against MaxApprovalWaits. It gave its place back once approved, so
// approved calls waiting for a full cap (each up to its timeout) and new calls waiting for
// approval together took every worker, and calls needing none were not served. Now a call
// needing approval past the bound is refused rate_limited, nobody asked, and a call needing
// none is served.
func TestSlotWaitCountsAsApprovalWait(t *testing.T) {
	limits := Limits{Tools: map[string]Rate{"fixture__wipe": {Concurrency: 1}}}
	busy := make(chan string, 64)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ex := r.startExecutor(r.managerConfig(Config{Workers: 2, Limits: limits, hooks: testHooks{slotBusy: func(id string) {
		select {
		case busy <- id:
		default:
		}
	}}}), r.env.NC)
	r.waitTool("fixture__wipe")
	if got := cap(ex.approvalWaits); got != 1 {
		t.Fatalf("MaxApprovalWaits of 2 workers = %d, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__wipe", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}

	done := r.approvalCall(ctx, "capped", "fixture__wipe")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "capped", Approve: true}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for its slot")
	}

	res := r.call("local", "fixture__wipe", `{}`, func(req *subjects.CallRequest) { req.ID, req.ApprovalTimeoutMs = "second", 2000 })
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("a call needing approval while the one place is held by a call waiting for its slot: %s %+v, want refused rate_limited", res.Status, res.Error)
	}
	if n := r.approvalWaits("second"); n != 0 {
		t.Errorf("the call past MaxApprovalWaits was held for approval %d times, want never", n)
	}
	if res := r.call("local", "fixture__echo", `{"text":"served"}`); res.Status != subjects.CallOK {
		t.Errorf("a call needing no approval: %s %+v, want ok", res.Status, res.Error)
	}

	held.release(ctx)
	if res := <-done; res.Status != subjects.CallOK {
		t.Errorf("the approved call once the slot was free: %s %+v, want ok", res.Status, res.Error)
	}
	// Its place is given back once it has its slot.
	done = r.approvalCall(ctx, "third", "fixture__wipe")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "third", Approve: false}); err != nil || !rep.OK {
		t.Fatalf("deny: %+v %v", rep, err)
	}
	<-done
}

// An approved call whose slot comes only once its timeout is used up (its worker stalled, the
// slot reads slow) is refused rate_limited, nothing sent: it was claimed and dispatched with
// no time left (a negative timeout), its outcome timeout — a side-effecting call that may
// have run, where nothing had.
func TestSlotPastTimeoutNotDispatched(t *testing.T) {
	const timeout = time.Second
	limits := Limits{Tools: map[string]Rate{"fixture__wipe": {Concurrency: 1}}}
	var held *lease
	var once sync.Once
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Limits: limits, hooks: testHooks{slotBusy: func(id string) {
		once.Do(func() {
			time.Sleep(timeout) // the worker stalls for the call's whole timeout (not a synchronisation)
			held.release(context.Background())
		})
	}}}), r.env.NC)
	r.waitTool("fixture__wipe")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	var refusal *subjects.Error
	var err error
	held, refusal, err = other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__wipe", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}

	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "late", Tool: "fixture__wipe", TimeoutMs: timeout.Milliseconds()})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	waitFor(t, "needs_approval of late", func() bool { return r.approvalWaits("late") > 0 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "late", Approve: true}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	res := <-done
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("an approved call whose slot came past its timeout: %s %+v, want refused rate_limited", res.Status, res.Error)
	}
	for _, ev := range r.auditEvents("local", "late") {
		if ev.Decision == "dispatch" {
			t.Errorf("dispatched with no time left: %+v", ev)
		}
	}
}

// An approved call waiting for a concurrency slot when its executor stops is handed back, and
// the approval record says so: the next delivery goes on as approved at once. It found the
// record approved by the delivery that handed it back and waited, as for a delivery that died
// before its answer, the call's timeout, RelistTimeout and AckWait for an answer that never
// came — past what its caller waits for.
func TestApprovedSlotWaitHandedBack(t *testing.T) {
	h := slotWaitHandedBack(t, 2000)
	r, id, ctx, limits := h.r, h.id, h.ctx, h.limits
	h.held.release(ctx)

	r.startExecutor(r.managerConfig(Config{AckWait: time.Second, FrontEnd: new(bool), Limits: limits}), r.env.Connect(t))
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the approved call handed back: %s %+v, want ok", res.Status, res.Error)
	}
	took := false
	for _, ev := range r.auditEvents("local", id) {
		if ev.Decision == subjects.DecisionApproved && strings.Contains(ev.Message, "handed it back") {
			took = true
		}
	}
	if !took {
		t.Errorf("the next delivery did not go on at once with the approval handed back: %+v", r.auditEvents("local", id))
	}
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("held for approval %d times, want once", n)
	}
}

// handedBack is an approved call to fixture__wipe (concurrency 1) that waited on executor A for
// the slot another holder keeps (held), and that A handed back when it stopped
// (slotWaitHandedBack). busy gets the ids the slotBusy hook reports; hook is that hook, for the
// executor that takes the call next.
type handedBack struct {
	r      *rig
	id     string
	ctx    context.Context
	limits Limits
	held   *lease
	busy   chan string
	hook   testHooks
}

// slotWaitHandedBack sets up a handedBack call whose timeout is timeoutMs.
func slotWaitHandedBack(t *testing.T, timeoutMs int64) handedBack {
	t.Helper()
	h := handedBack{limits: Limits{Tools: map[string]Rate{"fixture__wipe": {Concurrency: 1}}}, busy: make(chan string, 64)}
	busy := h.busy
	h.hook = testHooks{slotBusy: func(id string) {
		select {
		case busy <- id:
		default:
		}
	}}
	h.r = startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r := h.r
	r.startExecutor(Config{NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Workers: 1, FrontEnd: new(bool), Limits: h.limits, Log: testLogger(t), hooks: h.hook}))
	if err != nil {
		t.Fatal(err)
	}
	astop := runUntilStopped(t, a)
	waitFor(t, "executor A ready", a.Ready)
	waitFor(t, "fixture__wipe listed", func() bool { return a.reg.lookup("fixture__wipe") != nil })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	h.ctx = ctx
	other := newTestLimiter(t, r.env, Config{Limits: h.limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__wipe", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}
	h.held = held

	h.id = NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: h.id, Tool: "fixture__wipe", TimeoutMs: timeoutMs}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(h.id) > 0 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: h.id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for its slot")
	}
	astop() // hands the call back; the slot stays busy
	return h
}
