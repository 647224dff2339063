package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// fullExecutor starts an executor whose every place for calls waiting for approval
// (MaxApprovalWaits) is taken before it takes any call, as by calls waiting there; the
// returned func gives them back.
func fullExecutor(t *testing.T, r *rig, cfg Config) (*Executor, func()) {
	t.Helper()
	cfg.Log = testLogger(t).With().Str("role", "executor").Logger()
	ex, err := New(r.env.Connect(t), r.managerConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for range cap(ex.approvalWaits) {
		ex.approvalWaits <- struct{}{}
	}
	runUntilStopped(t, ex)
	return ex, func() {
		for range cap(ex.approvalWaits) {
			<-ex.approvalWaits
		}
	}
}

// TestApprovedHandedBackWithoutWaitPlace: an approved call handed back (its executor stopped
// while it waited for a concurrency slot) reached an executor whose places for calls waiting
// for approval were all taken: it was refused rate_limited ("needs approval ... try again
// later"), its approver's OK thrown away, though nobody is asked again and it waits for no
// human. A request whose approval record holds its outcome takes that outcome without a place.
func TestApprovedHandedBackWithoutWaitPlace(t *testing.T) {
	h := slotWaitHandedBack(t, 2000)
	r, id, ctx, limits := h.r, h.id, h.ctx, h.limits
	h.held.release(ctx)

	b, free := fullExecutor(t, r, Config{AckWait: time.Second, FrontEnd: new(bool), Limits: limits, Workers: 2, MaxApprovalWaits: 1})
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the approved call handed back to an executor with no place free: %s %+v, want ok (its approver was told OK)", res.Status, res.Error)
	}
	r.waitCallsSettled(ctx)
	free()
	if n := len(b.approvalWaits); n != 0 {
		t.Errorf("%d places still taken on B", n)
	}
}

// TestExpiredHandedBackWithoutWaitPlace: a call handed back after its approval timeout passed
// is answered approval_timeout at once (asking nobody), also on an executor whose places for
// calls waiting for approval are all taken: it was refused rate_limited ("try again later").
func TestExpiredHandedBackWithoutWaitPlace(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	timeout := handBackDelay / 2 // passed when the call comes back
	id := handBackWaitingCall(t, r, ctx, timeout)

	b, free := fullExecutor(t, r, Config{ApprovalTimeout: timeout, FrontEnd: new(bool), Workers: 2, MaxApprovalWaits: 1})
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout {
		t.Errorf("the call handed back past its approval timeout: %s %+v, want refused approval_timeout", res.Status, res.Error)
	}
	r.waitCallsSettled(ctx)
	free()
	if n := len(b.approvalWaits); n != 0 {
		t.Errorf("%d places still taken on B", n)
	}
}
