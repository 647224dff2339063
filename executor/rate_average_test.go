package executor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRateAverages: a caller that retries each refusal after its retryAfterMs gets the rate's
// PerSecond on average, as the README says ({perSecond: 1000, burst: 1} is "1 call per 100 ms,
// 10/s"). The sliding estimate prev×(1−elapsed) + current counted a fraction of a previous call
// against the window until its very end: with a previous window of n calls, at most n−1 fit in
// the next, so {perSecond: 1} allowed 0.5 calls/s, {perSecond: 1, burst: 2} 0.5/s and
// {perSecond: 10} 9/s. The clock is simulated: no wall-clock bound.
func TestRateAverages(t *testing.T) {
	env := natstest.Start(t)
	for i, r := range []Rate{{PerSecond: 1}, {PerSecond: 1, Burst: 2}, {PerSecond: 10}, {PerSecond: 1000, Burst: 1}, {PerSecond: 4, Burst: 3}} {
		t.Run(fmt.Sprintf("%+v", r), func(t *testing.T) {
			l := newTestLimiter(t, env, Config{})
			n, w := r.window()
			start := time.Unix(0, 1_800_000_000e9/int64(w)*int64(w)) // a window boundary
			clock := start
			l.now = func() time.Time { return clock }
			lim := []scopeLimit{{subjects.LimitScopeTool, fmt.Sprintf("s__t%d", i), r}}
			windows := 40
			end := start.Add(time.Duration(windows) * w)
			var ran []time.Time
			refusedAgain := 0 // retries refused although nothing else was counted meanwhile
			refused := false
			for attempts := 0; clock.Before(end) && attempts < 100*windows*int(n); attempts++ {
				_, refusal, err := l.acquire(context.Background(), "c", lim)
				if err != nil {
					t.Fatal(err)
				}
				if refusal == nil {
					ran = append(ran, clock)
					refused = false
					continue // at once again: the caller is greedy
				}
				if refused {
					refusedAgain++
				}
				refused = true
				if refusal.RetryAfterMs <= 0 {
					t.Fatalf("retryAfterMs %d", refusal.RetryAfterMs)
				}
				clock = clock.Add(time.Duration(refusal.RetryAfterMs) * time.Millisecond)
			}
			ok := len(ran)
			if clock.Before(end) {
				t.Fatalf("the caller did not reach the end of the simulated time (%d calls ran)", ok)
			}
			// n calls at once (an idle start), then PerSecond; never more.
			want := float64(windows) * float64(n)
			t.Logf("%d calls ran in %d windows", ok, windows)
			if refusedAgain > 0 {
				t.Errorf("%d retries after retryAfterMs were refused again", refusedAgain)
			}
			if float64(ok) < 0.95*want || float64(ok) > want+float64(n)+1 {
				t.Errorf("%d calls ran in %d windows of %d calls per %s: want about %.0f (the rate's average)", ok, windows, n, w, want)
			}
			// The window slides: within any span of one window, a burst at the end of one
			// window and the calls of the next make 2n at most (README).
			for i, at := range ran {
				j := i
				for j < len(ran) && ran[j].Sub(at) < w {
					j++
				}
				if j-i > 2*int(n) {
					t.Fatalf("%d calls within %s from %s", j-i, w, at.Sub(start))
				}
			}
		})
	}
}
