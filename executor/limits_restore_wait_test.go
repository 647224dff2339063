package executor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// blockedRestore makes l's restore block, once called, until the returned release is called;
// started is closed as it begins. Then it declares the state again, as an executor does.
func blockedRestore(t *testing.T, env *natstest.Env, l *limiter) (started <-chan struct{}, release func()) {
	t.Helper()
	begun, done := make(chan struct{}), make(chan struct{})
	var once, rel sync.Once
	l.restore = func(ctx context.Context) error {
		once.Do(func() { close(begun) })
		<-done
		_, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false)
		return err
	}
	release = func() { rel.Do(func() { close(done) }) }
	t.Cleanup(release)
	return begun, release
}

// await waits for done, failing when it does not come within waitLimit (a hang): false then.
func await(t *testing.T, what string, done <-chan error) (error, bool) {
	t.Helper()
	select {
	case err := <-done:
		return err, true
	case <-time.After(waitLimit):
		t.Errorf("%s: held up by a restore it has no part in", what)
		return nil, false
	}
}

// TestUncappedCallNotHeldByRestore: while a call that found the slots bucket gone declares it
// again (a restore that may take restoreWait: a request JetStream drops), a call with no
// concurrency cap — rates only, or no limits at all (an approved call takes its slots with
// acquireSlots whatever its limits) — waited for the restore to end before it could go on,
// though it takes no slot.
func TestUncappedCallNotHeldByRestore(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	started, release := blockedRestore(t, env, l)
	loseSlots(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	capped := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	rated := []scopeLimit{{subjects.LimitScopeTool, "t", Rate{PerSecond: 1000}}}

	restoring := make(chan error, 1)
	go func() {
		ls, refusal, err := l.acquireFor(ctx, "capped", time.Minute, capped)
		if refusal != nil {
			err = errors.New("refused " + refusal.Message)
		}
		ls.release(context.WithoutCancel(ctx))
		restoring <- err
	}()
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("the capped call did not find the slots bucket gone")
	}

	run := func(f func() (*lease, *subjects.Error, error)) <-chan error {
		done := make(chan error, 1)
		go func() {
			ls, refusal, err := f()
			if refusal != nil {
				err = errors.New("refused " + refusal.Message)
			}
			ls.release(context.WithoutCancel(ctx))
			done <- err
		}()
		return done
	}
	noLimits := run(func() (*lease, *subjects.Error, error) { return l.acquireSlots(ctx, "approved", time.Minute, nil, nil) })
	ratesOnly := run(func() (*lease, *subjects.Error, error) { return l.acquireFor(ctx, "rated", time.Minute, rated) })
	if err, ok := await(t, "a call with no limits", noLimits); ok && err != nil {
		t.Errorf("a call with no limits: %v", err)
	}
	if err, ok := await(t, "a call with rates only", ratesOnly); ok && err != nil {
		t.Errorf("a call with rates only: %v", err)
	}
	release()
	if err := <-restoring; err != nil {
		t.Errorf("the capped call after the restore: %v", err)
	}
}

// TestRetryAfterFailedRestoreHoldsNoOtherCall: declaring the limits state again failed, and a
// call past the once-a-second bound tries again, which may take all of restoreWait (5 s: a
// request JetStream drops, as when the executor's NATS user may not declare it). Every other
// call with limits that found the state gone meanwhile waited for that try to end — a worker
// each, for up to 5 s of every 6 while the failure lasts: enough of them held every worker, and
// calls with no limits waited too. They are refused at once with the last failure instead.
func TestRetryAfterFailedRestoreHoldsNoOtherCall(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	var skew atomic.Int64
	l.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	const why = "declared by hand: remove it"
	var tries atomic.Int64
	started, done := make(chan struct{}), make(chan struct{})
	l.restore = func(context.Context) error {
		if tries.Add(1) == 2 {
			close(started)
			<-done
		}
		return errors.New(why)
	}
	var rel sync.Once
	release := func() { rel.Do(func() { close(done) }) }
	t.Cleanup(release)
	loseSlots(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	capped := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	acquire := acquireAsync(ctx, l, capped)
	if err := <-acquire("first"); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("the first call: %v, want the failure %q", err, why)
	}
	skew.Add(int64(2 * time.Second)) // (past the once-a-second bound)
	retrying := acquire("retry")
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("no second try")
	}
	err, ok := await(t, "a call while the restore is tried again", acquire("other"))
	if ok && (err == nil || !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), why)) {
		t.Errorf("a call while the restore is tried again: %v, want ErrLimits with the last failure %q", err, why)
	}
	release()
	if err := <-retrying; err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("the retrying call: %v, want the failure %q", err, why)
	}
	if n := tries.Load(); n != 2 {
		t.Errorf("%d tries, want 2", n)
	}
}

// acquireAsync returns a function that starts acquireFor of lim on l for a call id, the lease
// (if any) released at once, and gives its error (a refusal as one) on the channel it returns.
func acquireAsync(ctx context.Context, l *limiter, lim []scopeLimit) func(id string) <-chan error {
	return func(id string) <-chan error {
		res := make(chan error, 1)
		go func() {
			ls, refusal, err := l.acquireFor(ctx, id, time.Minute, lim)
			if refusal != nil {
				err = errors.New("refused " + refusal.Message)
			}
			ls.release(context.WithoutCancel(ctx))
			res <- err
		}()
		return res
	}
}
