package executor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRetryAfterUnderContention: a window's counter also holds, for a moment, the calls being
// refused (each adds 1, sees the total, gives its 1 back). A call refused while others were being
// refused counted them as calls that ran: with {perSecond: 0.01, burst: 2} (2 per 200 s), 2 calls
// run and 6 others counted at once, the next was told to come back 1.75 windows after the
// window's start (300 s from a quarter into it) instead of just past the window's end (150 s),
// whereas at most burst calls of a window ever run: the refused ones give their counts back. The
// clock is simulated.
func TestRetryAfterUnderContention(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	r := Rate{PerSecond: 0.01, Burst: 2}
	n, w := r.window()
	start := time.Unix(0, 1_800_000_000e9/int64(w)*int64(w)) // a window boundary
	clock := start.Add(w / 4)
	l.now = func() time.Time { return clock }
	s := scopeLimit{subjects.LimitScopeTool, "s__contended", r}
	lim := []scopeLimit{s}
	ctx := context.Background()
	for i := range n {
		if _, refusal, err := l.acquire(ctx, "ran", lim); err != nil || refusal != nil {
			t.Fatalf("call %d: %v %+v", i, err, refusal)
		}
	}
	// Six calls being refused at the same moment: counted, their give-backs not yet in.
	incr := func(by string) { countRefusing(t, env, s, w, clock, by, 6) }
	incr("1")
	_, refusal, err := l.acquire(ctx, "refused", lim)
	if err != nil || refusal == nil {
		t.Fatalf("got %v %+v, want a rate refusal", err, refusal)
	}
	incr("-1") // their give-backs land
	retry := time.Duration(refusal.RetryAfterMs) * time.Millisecond
	if limit := start.Add(w).Sub(clock) + time.Second; retry > limit {
		t.Errorf("retryAfterMs %d (%s): the call is allowed %s from now, just past the window's end", refusal.RetryAfterMs, retry, limit-time.Second)
	}
	clock = clock.Add(retry)
	if _, refusal, err := l.acquire(ctx, "retry", lim); err != nil || refusal != nil {
		t.Errorf("retried after retryAfterMs: %v %+v, want it to run", err, refusal)
	}
}

// countRefusing adds by (1 or -1) times times to the rate counter of s's window at clock, as
// calls being refused do (each adds 1, sees the total, gives its 1 back).
func countRefusing(t *testing.T, env *natstest.Env, s scopeLimit, w time.Duration, clock time.Time, by string, times int) {
	t.Helper()
	subject := counterSubject(s, clock.UnixNano()/int64(w))
	for range times {
		if _, err := env.JS.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Header: nats.Header{"Nats-Incr": []string{by}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetryAfterUnderContentionPreviousWindow: TestRetryAfterUnderContention within a window
// the previous one still weighs on. With {perSecond: 0.02, burst: 4} (4 per 200 s) after a full
// window, 40 s into the next one the previous window weighs ⌊4×0.8⌋ = 3 calls: one call runs,
// and two others are being refused at the same moment as the next (counted, their give-backs
// not in yet). The next was told to come back 110 s later, when the previous window weighs 1
// (the two being refused counted as calls that ran), instead of 10 s later, when it weighs 2
// and the call is allowed once the two give back — as README promises (the calls being refused
// at the same moment give their counts back). The clock is simulated.
func TestRetryAfterUnderContentionPreviousWindow(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	r := Rate{PerSecond: 0.02, Burst: 4}
	n, w := r.window()
	start := time.Unix(0, 1_800_000_000e9/int64(w)*int64(w)) // a window boundary
	s := scopeLimit{subjects.LimitScopeTool, "s__contended_prev", r}
	lim := []scopeLimit{s}
	ctx := context.Background()
	clock := start.Add(-w / 2) // the window before: full
	l.now = func() time.Time { return clock }
	for i := range n {
		if _, refusal, err := l.acquire(ctx, "before", lim); err != nil || refusal != nil {
			t.Fatalf("call %d of the window before: %v %+v", i, err, refusal)
		}
	}
	clock = start.Add(w / 5) // ⌊4×0.8⌋ = 3: room for one call
	if _, refusal, err := l.acquire(ctx, "ran", lim); err != nil || refusal != nil {
		t.Fatalf("call with room: %v %+v", err, refusal)
	}
	incr := func(by string) { countRefusing(t, env, s, w, clock, by, 2) }
	incr("1") // two calls being refused at the same moment
	_, refusal, err := l.acquire(ctx, "refused", lim)
	if err != nil || refusal == nil {
		t.Fatalf("got %v %+v, want a rate refusal", err, refusal)
	}
	incr("-1") // their give-backs land
	retry := time.Duration(refusal.RetryAfterMs) * time.Millisecond
	// ⌊4×(1−f)⌋+2 ≤ 4 once f > 0.25: 10 s from now.
	if limit := start.Add(w/4).Sub(clock) + time.Second; retry > limit {
		t.Errorf("retryAfterMs %d (%s): the call is allowed %s from now", refusal.RetryAfterMs, retry, limit-time.Second)
	}
	clock = clock.Add(retry)
	if _, refusal, err := l.acquire(ctx, "retry", lim); err != nil || refusal != nil {
		t.Errorf("retried after retryAfterMs: %v %+v, want it to run", err, refusal)
	}
}
