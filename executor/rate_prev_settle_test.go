package executor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestPreviousWindowGiveBacksLate: the count of the previous window was read once, at the
// first call of a window, and kept for the whole window. Calls refused at the end of the
// previous window are in its counter until their give-backs land (milliseconds): read then,
// the previous window weighed as if they had run, for the whole window — with {perSecond:
// 0.01, burst: 2}, 2 calls run and 6 being refused at its end, the next window ran nothing
// until three quarters of it had passed (the estimate ⌊8×(1−f)⌋ + 1 instead of ⌊2×(1−f)⌋ + 1),
// and its refusals said to come back that late. A call the previous window's count refuses
// reads it again while it may still be settling. The clock is simulated.
func TestPreviousWindowGiveBacksLate(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	r := Rate{PerSecond: 0.01, Burst: 2} // 2 per 200 s
	n, w := r.window()
	start := time.Unix(0, 1_800_000_000e9/int64(w)*int64(w)) // a window boundary
	clock := start.Add(w * 3 / 4)
	l.now = func() time.Time { return clock }
	s := scopeLimit{subjects.LimitScopeTool, "s__late", r}
	lim := []scopeLimit{s}
	ctx := context.Background()
	for i := range n {
		if _, refusal, err := l.acquire(ctx, "ran", lim); err != nil || refusal != nil {
			t.Fatalf("call %d: %v %+v", i, err, refusal)
		}
	}
	// Six calls being refused at the end of the window: counted, their give-backs not yet in.
	subject := counterSubject(s, clock.UnixNano()/int64(w))
	incr := func(by string) {
		for range 6 {
			if _, err := env.JS.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: nats.Header{"Nats-Incr": []string{by}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	incr("1")
	// The next window's first call, as the window begins, reads the previous window's count
	// with them in it.
	clock = start.Add(w + 50*time.Millisecond)
	if _, refusal, err := l.acquire(ctx, "first", lim); err != nil || refusal == nil {
		t.Fatalf("the first call of the next window, the previous one holding 8: %v %+v, want a rate refusal", err, refusal)
	}
	incr("-1") // their give-backs land
	// Half way into the window: ⌊2×0.5⌋ + 1 = 2 calls, within the rate.
	clock = start.Add(w + w/2)
	if _, refusal, err := l.acquire(ctx, "half", lim); err != nil || refusal != nil {
		t.Errorf("half way into the window after one that ran 2 calls of 2: %v %+v, want it to run", err, refusal)
	}
}
