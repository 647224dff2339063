package executor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRetryAfterAcrossExecutorsClockSamples: each executor measured the offset of the NATS
// server's clock with one round trip, taken as answered halfway through it: a round trip slowed
// on one side (CPU contention as the executors start, a GC pause) put the offset off by up to
// half of it, +20 ms on one executor and −20 ms on another on the very same clock. A call
// refused by the first was told to come back just past the moment the rate allows it, on the
// first's clock; retried then on the second, it came 40 ms early on the second's and was
// refused again (seen in TestLimitsSeeded: offsets 12 ms apart on one host, retries after
// retryAfterMs refused). The offset is now the best of several round trips.
func TestRetryAfterAcrossExecutorsClockSamples(t *testing.T) {
	env := natstest.Start(t)
	// A slow first round trip: slowed before the server reads its clock (a), after it (b).
	skewed := func(l *limiter, before bool) {
		var n atomic.Int32
		l.serverTime = func(ctx context.Context) (time.Time, error) {
			slow := n.Add(1) == 1
			if slow && before {
				time.Sleep(40 * time.Millisecond)
			}
			info, err := l.stream.Info(ctx)
			if err != nil {
				return time.Time{}, err
			}
			if slow && !before {
				time.Sleep(40 * time.Millisecond)
			}
			return info.TimeStamp, nil
		}
	}
	a, b := newTestLimiter(t, env, Config{}), newTestLimiter(t, env, Config{})
	skewed(a, true)
	skewed(b, false)
	lim := []scopeLimit{{subjects.LimitScopeTool, "s__t", Rate{PerSecond: 10, Burst: 1}}} // 1 per 100 ms
	ctx := context.Background()
	b.windowNow(ctx) // (b measures its offset now)
	// A call first, so that every round's first call is admitted at the start of a window (after
	// a refusal, as the later rounds' are): one admitted late in a window had the second call
	// cross into the next, where the rate allows it (round 0 failed so in 4 of 150 runs).
	if _, _, err := a.acquire(ctx, "warm", lim); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		// The first call of a window on a, then the second, refused: retried on b after its
		// retryAfterMs, it runs.
		for {
			_, refusal, err := a.acquire(ctx, "first", lim)
			if err != nil {
				t.Fatal(err)
			}
			if refusal == nil {
				break
			}
			time.Sleep(time.Duration(refusal.RetryAfterMs) * time.Millisecond)
		}
		_, refusal, err := a.acquire(ctx, "second", lim)
		if err != nil || refusal == nil {
			t.Fatalf("round %d: second call of the window: %v %+v, want a rate refusal", i, err, refusal)
		}
		time.Sleep(time.Duration(refusal.RetryAfterMs) * time.Millisecond)
		if _, again, err := b.acquire(ctx, "second", lim); err != nil || again != nil {
			t.Fatalf("round %d: retried on another executor after retryAfterMs %d: %v %+v (offsets: %s and %s)", i,
				refusal.RetryAfterMs, err, again, time.Duration(a.offset.Load()), time.Duration(b.offset.Load()))
		}
	}
}
