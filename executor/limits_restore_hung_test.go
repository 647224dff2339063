package executor

import (
	"bytes"
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

// lostAckKV is a slots bucket whose Create is stored but answered with an error, as a retake
// cut off by the restore's bound (or a renewal timing out) with its Create sent: JetStream
// stores it, the lease never learns its revision.
type lostAckKV struct{ jetstream.KeyValue }

func (kv lostAckKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if _, err := kv.KeyValue.Create(context.WithoutCancel(ctx), key, value, opts...); err != nil {
		return 0, err
	}
	return 0, context.DeadlineExceeded
}

// TestRetakeCutOffRenewsAndReleases: a live lease whose retake was cut off by the restore's
// bound with its Create of a slot sent (stored in the bucket declared again, unacknowledged)
// kept the revision of the lost bucket, later than any of the new one's: the slot held its
// value, and ownRevision took the later of the two, the lost bucket's. Every renewal and the
// release then wrote at a revision the slot never had: the slot was not renewed (freed by its
// TTL while the call ran), and held after the call ended, refusing calls under the cap until
// the TTL ran out. A lease that does not know whether its Create was stored knows no revision:
// the slot's value says whether it is the lease's.
func TestRetakeCutOffRenewsAndReleases(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for range 20 { // (the lost bucket's revisions past the new one's)
		if _, err := l.slots.Put(ctx, "pad", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	capped := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	ls := mustAcquire(t, l, "live", capped)
	key, old := ls.slots[0].key, ls.slots[0].rev

	loseSlots(t, env)
	if _, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false); err != nil {
		t.Fatal(err)
	}
	slots := l.slots
	l.slots = lostAckKV{slots}
	ls.renew(ctx) // (the retake, cut off)
	l.slots = slots
	e, err := slots.Get(ctx, key)
	if err != nil || !bytes.Equal(e.Value(), ls.val) || e.Revision() >= old {
		t.Fatalf("precondition: the slot retaken unacknowledged below revision %d: %v %v", old, e, err)
	}

	ls.renew(ctx) // (its next renewal: a heartbeat's)
	if again, err := slots.Get(ctx, key); err != nil || again.Revision() == e.Revision() {
		t.Errorf("the renewal after the cut-off retake: slot at %v (%v), want it renewed past %d", again, err, e.Revision())
	}
	ls.release(ctx)
	mustAcquire(t, l, "after", capped).release(ctx) // (the released call's slot freed)
}
