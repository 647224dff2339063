package executor

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCapHoldsAcrossRepeatedLosses: one executor's callers take and release a cap of 2 while
// its heartbeats renew every live lease and the slots bucket is lost again and again. Its own
// calls in flight take their slots again before any new call takes one: the cap holds at every
// moment, and no lease stays live once released. (A request in flight as its stream is deleted
// gets no answer: the call, and a restore waiting for it, wait until its context ends: 2 s here.)
func TestCapHoldsAcrossRepeatedLosses(t *testing.T) {
	env := natstest.Start(t)
	l := restoringLimiter(t, env, "l")
	var skew atomic.Int64 // (each loss 2 s later on the limiter's clock: past the once-a-second bound)
	l.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	const capN, callers, losses = 2, 5, 3
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: capN}}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var held, maxSeen, granted, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// (a request the server drops, its stream deleted under it, holds a call until
				// its context ends: 2 s, not the test's)
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				ls, refusal, err := l.acquireFor(cctx, "c"+strconv.Itoa(c)+"."+strconv.Itoa(i), time.Minute, lim)
				if err != nil || refusal != nil {
					ccancel()
					if err != nil {
						failed.Add(1) // (the bucket gone, found by a call within a second of a restore)
					}
					time.Sleep(time.Millisecond)
					continue
				}
				granted.Add(1)
				n := held.Add(1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				time.Sleep(3 * time.Millisecond)
				held.Add(-1) // (before the release: the slot is still taken until then)
				ccancel()
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second) // (not cut short by the call's)
				ls.release(rctx)
				rcancel()
			}
		})
	}
	wg.Go(func() { // (the heartbeats)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			l.liveMu.Lock()
			var live []*lease
			for ls := range l.live {
				live = append(live, ls)
			}
			l.liveMu.Unlock()
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			for _, ls := range live {
				ls.renew(rctx)
			}
			rcancel()
		}
	})
	for range losses {
		from := granted.Load()
		waitFor(t, "calls running", func() bool { return granted.Load() >= from+20 })
		skew.Add(int64(2 * time.Second))
		loseSlots(t, env)
	}
	from := granted.Load()
	waitFor(t, "calls running after the last loss", func() bool { return granted.Load() >= from+20 })
	close(stop)
	wg.Wait()
	if m := maxSeen.Load(); m > capN {
		t.Errorf("%d calls held a cap of %d at once", m, capN)
	}
	l.liveMu.Lock()
	n := len(l.live)
	l.liveMu.Unlock()
	if n != 0 {
		t.Errorf("%d leases live after every call released", n)
	}
	t.Logf("%d calls ran, %d found the limits unavailable", granted.Load(), failed.Load())
}

// TestLiveLeasesForgotten: a call refused by its second cap after it took the first, and every
// call that ended, leave no lease in the live set (which a restore has take its slots again).
func TestLiveLeasesForgotten(t *testing.T) {
	env := natstest.Start(t)
	l := restoringLimiter(t, env, "l")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	a := scopeLimit{subjects.LimitScopeServer, "a", Rate{Concurrency: 1}}
	b := scopeLimit{subjects.LimitScopeTool, "b", Rate{Concurrency: 1}}
	live := func() int {
		l.liveMu.Lock()
		defer l.liveMu.Unlock()
		return len(l.live)
	}
	holder := mustAcquire(t, l, "holder", []scopeLimit{a})
	wantCapFull(t, l, "both", []scopeLimit{b, a}, "a is held") // (b taken, then given up)
	if n := live(); n != 1 {
		t.Fatalf("%d leases live with one call holding slots, want 1", n)
	}
	mustAcquire(t, l, "b alone", []scopeLimit{b}).release(ctx) // (b was given up)
	holder.release(ctx)
	none := mustAcquire(t, l, "no caps", []scopeLimit{{subjects.LimitScopeServer, "r", Rate{PerSecond: 100}}})
	if n := live(); n != 0 {
		t.Fatalf("%d leases live once every call holding slots ended, want 0", n)
	}
	none.release(ctx)
}
