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

// loseLimits removes the limits stream and the slots bucket, as a NATS restart without its
// store loses them (memory storage).
func loseLimits(t *testing.T, env *natstest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.LimitsStream); err != nil {
		t.Fatal(err)
	}
	loseSlots(t, env)
}

// TestOldRestoreFailureRefusesNoRatedCall is TestOldRestoreFailureRefusesNoCall for an
// executor with rate limits and no concurrency cap: no call of it takes a slot, and a call
// that took a slot was the only one to end a restore failure the state had come back from
// (declared by another executor). At the next loss, every call finding the (quick) try
// running was refused at once with a failure hours old. A counted call ends it too there.
func TestOldRestoreFailureRefusesNoRatedCall(t *testing.T) {
	env := natstest.Start(t)
	rated := []scopeLimit{{subjects.LimitScopeTool, "t", Rate{PerSecond: 1000}}}
	cfg := Config{Limits: Limits{Tools: map[string]Rate{"*": rated[0].rate}}}
	l := newTestLimiter(t, env, cfg)
	l.uncapped = !cfg.Limits.capped() // (as Run sets it)
	if !l.uncapped {
		t.Fatal("limits with no concurrency cap said capped")
	}
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
	acquire := acquireAsync(ctx, l, rated)

	loseLimits(t, env)
	if err := <-acquire("first"); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("the first call: %v, want the failure %q", err, why)
	}
	if _, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false); err != nil { // (another executor)
		t.Fatal(err)
	}
	if err := <-acquire("between"); err != nil {
		t.Fatalf("a call once the state is back: %v", err)
	}

	loseLimits(t, env)
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
