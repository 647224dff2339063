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

// TestOldRestoreFailureRefusesNoCall: declaring the limits state again failed once (JetStream
// not ready yet after a NATS restart), then the state came back without this executor's
// restore (another executor declared it) and calls took their slots again. At the next loss
// (NATS restarted again), a call finding the try running was refused at once with that old
// failure, which no longer said anything of the state, though the try was one that succeeds
// in milliseconds. The failure ends with a call that took its slots; the call waits for the
// try and goes on.
func TestOldRestoreFailureRefusesNoCall(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	oldFailureThenLoss(t, env, l, []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 2}}}, loseSlots)
}

// oldFailureThenLoss is the scenario of TestOldRestoreFailureRefusesNoCall for limiter l and
// calls with limits lim: a restore fails once, another executor declares the state again (a
// call goes through), then lose removes the state again and a call finding the next (held)
// try running must wait for it, not be refused with the old failure.
func oldFailureThenLoss(t *testing.T, env *natstest.Env, l *limiter, lim []scopeLimit, lose func(*testing.T, *natstest.Env)) {
	t.Helper()
	var skew atomic.Int64
	l.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	const why = "JetStream not ready yet"
	var tries atomic.Int64
	started, done := make(chan struct{}), make(chan struct{})
	l.restore = func(ctx context.Context) error {
		switch tries.Add(1) {
		case 1:
			return errors.New(why)
		case 2:
			close(started)
			<-done
		}
		_, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false)
		return err
	}
	var rel sync.Once
	release := func() { rel.Do(func() { close(done) }) }
	t.Cleanup(release)
	waiting := make(chan struct{}, 1)
	l.restoreWaited = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	acquire := acquireAsync(ctx, l, lim)

	lose(t, env)
	if err := <-acquire("first"); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("the first call: %v, want the failure %q", err, why)
	}
	if _, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false); err != nil { // (another executor)
		t.Fatal(err)
	}
	if err := <-acquire("between"); err != nil {
		t.Fatalf("a call once the state is back: %v", err)
	}

	lose(t, env)
	skew.Add(int64(2 * time.Second)) // (past the once-a-second bound)
	restoring := acquire("restoring")
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("no second try")
	}
	other := acquire("other")
	select {
	case <-waiting:
	case err := <-other:
		t.Fatalf("a call while the state is declared again, long after a failure since undone: %v, want it to wait for the try", err)
	case <-time.After(waitLimit):
		t.Fatal("the other call neither waited nor was answered")
	}
	release()
	if err, ok := await(t, "the restoring call", restoring); ok && err != nil {
		t.Errorf("the restoring call: %v", err)
	}
	if err, ok := await(t, "the other call", other); ok && err != nil {
		t.Errorf("the other call: %v", err)
	}
}
