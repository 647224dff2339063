package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// proxiedLimiter is a limiter whose NATS connection goes through a PausableProxy (a NATS that
// hangs while paused), declaring the state again, when it finds it gone, over the test's own
// connection (as another executor could) and then hanging: a restore that succeeds just as
// NATS stops answering.
func proxiedLimiter(t *testing.T, env *natstest.Env) (*limiter, *natstest.PausableProxy) {
	t.Helper()
	p := natstest.NewPausableProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLimiter(t, &natstest.Env{URL: p.URL(), NC: nc, JS: js}, Config{})
	l.restoreBound = time.Second
	l.restore = func(ctx context.Context) error {
		_, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false)
		p.Pause()
		return err
	}
	return l, p
}

// TestRestoreRetakeBounded: a restore takes the live leases' slots again (retakeLive) holding
// every capped call of the executor off the slots (restoring) and every call finding the state
// gone off the restore (restoreMu). That retake ran outside the restore's bound, with the
// finding call's context: NATS hanging just then (or slow) held the restore, and every capped
// call, for as long as that context lasts (a worker's has no deadline: the client's 5 s for each
// read and write of each slot of each live lease, one after the other), and a live lease busy in
// a renewal hanging as long held it whatever the context. The retake now ends with the
// restore's bound; what it did not retake, the leases' next renewals do.
func TestRestoreRetakeBounded(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			env := natstest.Start(t)
			l, p := proxiedLimiter(t, env)
			ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
			defer cancel()
			capped := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 2}}}
			ls := mustAcquire(t, l, "live", capped)
			loseSlots(t, env)
			if busy {
				// A renewal (a heartbeat's) holding the lease while NATS hangs.
				p.Pause()
				renewing := make(chan struct{})
				go func() {
					ls.mu.Lock()
					close(renewing)
					ls.renewLocked(ctx)
					ls.mu.Unlock()
				}()
				<-renewing
			}
			lost := fmt.Errorf("%w: %w", ErrLimits, jetstream.ErrBucketNotFound)
			done := make(chan error, 1)
			go func() { done <- l.restoreState(ctx, lost) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the restore: %v, want the state declared again", err)
				}
			case <-time.After(waitLimit):
				t.Fatal("the restore hung with NATS, past its bound (restoring held: every capped call with it)")
			}
		})
	}
}
