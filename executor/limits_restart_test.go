package executor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// settledTotal is counterTotal once it equals want (give-backs are checked, and undone, in the
// background), or the last total read after a bounded number of reads.
func settledTotal(t *testing.T, l *limiter, s scopeLimit, from time.Time, want int64) int64 {
	t.Helper()
	var got int64
	for range 300 {
		if got = counterTotal(t, l, s, from, time.Now()); got == want {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// TestGiveBackAfterNATSRestart: the rate counters are in memory storage, which a restarted NATS
// server does not keep; the first call after the restart declares them again, empty. A call
// admitted before the restart that gives its count back afterwards (refused at its claim, or a
// -1 waiting in the client's reconnect buffer) subtracted 1 from a counter that never held its
// increment: the counter went below the calls it held (below 0 when it held none), and every
// unit below let one more call through in that window.
func TestGiveBackAfterNATSRestart(t *testing.T) {
	env := startNATS(t, natsembed.Config{})
	l := newTestLimiter(t, env, Config{})
	l.restore = func(ctx context.Context) error {
		_, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false)
		return err
	}
	a := scopeLimit{subjects.LimitScopeTool, "s__a", Rate{PerSecond: 0.01, Burst: 3}} // 3 per 300 s
	b := scopeLimit{subjects.LimitScopeTool, "s__b", Rate{PerSecond: 0.01, Burst: 3}}
	ctx := context.Background()
	start := time.Now()

	// Traffic before the restart: the old stream's sequences are past the new one's.
	for i := range 10 {
		ls, refusal, err := l.acquire(ctx, "early"+strconv.Itoa(i), []scopeLimit{a})
		if err != nil || refusal != nil {
			t.Fatalf("early call %d: %v %+v", i, err, refusal)
		}
		ls.refund()
	}
	heldA, refusal, err := l.acquire(ctx, "heldA", []scopeLimit{a})
	if err != nil || refusal != nil {
		t.Fatalf("heldA: %v %+v", err, refusal)
	}
	heldB, refusal, err := l.acquire(ctx, "heldB", []scopeLimit{b})
	if err != nil || refusal != nil {
		t.Fatalf("heldB: %v %+v", err, refusal)
	}

	restartServer(t, env)
	waitFor(t, "reconnected", env.NC.IsConnected)
	// The first call after the restart finds the counters gone and declares them again.
	waitFor(t, "a call after the restart", func() bool {
		_, refusal, err := l.acquire(ctx, "after", []scopeLimit{a})
		if refusal != nil {
			t.Fatalf("after the restart: %+v", refusal)
		}
		return err == nil
	})
	// The calls admitted before the restart do not run after all.
	heldA.refund()
	heldB.refund()

	if got := settledTotal(t, l, a, start, 1); got != 1 {
		t.Errorf("a's counter after a give-back of a call counted before the restart: %d, want 1 (the call after the restart)", got)
	}
	if got := settledTotal(t, l, b, start, 0); got != 0 {
		t.Errorf("b's counter after a give-back of a call counted before the restart: %d, want 0", got)
	}
	// The rates allow what they say since the restart, and no more.
	for _, tc := range []struct {
		s    scopeLimit
		more int
	}{{a, 2}, {b, 3}} {
		for i := range tc.more {
			if _, refusal, err := l.acquire(ctx, tc.s.key+strconv.Itoa(i), []scopeLimit{tc.s}); err != nil || refusal != nil {
				t.Fatalf("%s call %d: %v %+v", tc.s.key, i, err, refusal)
			}
		}
		if _, refusal, err := l.acquire(ctx, tc.s.key+"-over", []scopeLimit{tc.s}); err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
			t.Errorf("%s: a call past its 3 since the restart: got %v %+v, want rate_limited", tc.s.key, err, refusal)
		}
	}
}
