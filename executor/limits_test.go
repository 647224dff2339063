package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

func TestRateWindow(t *testing.T) {
	cases := []struct {
		rate Rate
		n    int64
		w    time.Duration
	}{
		{Rate{PerSecond: 10}, 10, time.Second},
		{Rate{PerSecond: 10, Burst: 5}, 5, 500 * time.Millisecond},
		{Rate{PerSecond: 0.5}, 1, 2 * time.Second},
		{Rate{PerSecond: 1000, Burst: 1}, 1, minWindow},
		{Rate{PerSecond: 0.0001, Burst: 10}, 10, maxWindow},
		{Rate{Concurrency: 3}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%+v", tc.rate), func(t *testing.T) {
			n, w := tc.rate.window()
			if n != tc.n || w != tc.w {
				t.Errorf("got %d per %s, want %d per %s", n, w, tc.n, tc.w)
			}
		})
	}
}

func TestRateWait(t *testing.T) {
	w := time.Second
	cases := []struct {
		name      string
		n         int64
		frac      float64
		prev, cur int64
		want      time.Duration
	}{
		{"within, empty previous", 5, 0.5, 0, 5, 0},
		{"over, empty previous: next window", 5, 0.5, 0, 6, 500 * time.Millisecond}, // ⌊5×(1−f)⌋+1 ≤ 5 once f > 0 of the next
		{"previous weighs", 5, 0.0, 8, 1, 375 * time.Millisecond},                   // ⌊8×(1−f)⌋+1 ≤ 5 once f > 0.375
		{"previous weighs, another ran", 5, 0.25, 6, 2, 83 * time.Millisecond},      // ⌊6×(1−f)⌋+2 ≤ 5 once f > 1/3
		// The other counted at the window's start cannot have run (⌊8⌋+1 > 5): it is being
		// refused and gives back (TestRetryAfterUnderContentionPreviousWindow).
		{"previous weighs, the other being refused", 5, 0.0, 8, 2, 375 * time.Millisecond},
		{"previous weighs a whole call less", 5, 0.0, 4, 2, time.Millisecond}, // ⌊4×(1−f)⌋+2 ≤ 5 once f > 0
		{"previous weighs less later", 5, 0.75, 4, 2, 0},                      // ⌊4×0.25⌋+2 = 3
		// 8 others counted, of which at most 4 ran (the rest are being refused and give back):
		// ⌊4×(1−f)⌋+1 ≤ 4 once f > 0 of the next window (TestRetryAfterUnderContention).
		{"over: next window, others being refused", 4, 0.5, 0, 9, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rateWait(tc.n, w, tc.frac, tc.prev, tc.cur)
			if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLimitsFor(t *testing.T) {
	l := Limits{
		Tenant:  Rate{PerSecond: 100},
		Servers: map[string]Rate{"*": {Concurrency: 8}, "kb": {PerSecond: 5}},
		Tools:   map[string]Rate{"ticketing__create*": {PerSecond: 1}, "*__get*": {PerSecond: 2}},
	}
	got := l.limitsFor("acme", &tool{Public: "ticketing__createIssue", Server: "ticketing", Name: "createIssue"})
	want := []scopeLimit{
		{subjects.LimitScopeTenant, "acme", Rate{PerSecond: 100}},
		{subjects.LimitScopeServer, "ticketing", Rate{Concurrency: 8}},
		{subjects.LimitScopeTool, "ticketing__createIssue", Rate{PerSecond: 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got = l.limitsFor("acme", &tool{Public: "kb__get_document", Server: "kb", Name: "get_document"})
	want = []scopeLimit{
		{subjects.LimitScopeTenant, "acme", Rate{PerSecond: 100}},
		{subjects.LimitScopeServer, "kb", Rate{PerSecond: 5}},
		{subjects.LimitScopeTool, "kb__get_document", Rate{PerSecond: 2}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// A pattern matches like a policy rule's: server part, then tool part.
	if got := l.limitsFor("acme", &tool{Public: "github__issues__create_comment", Server: "github", Name: "issues__create_comment"}); len(got) != 2 {
		t.Errorf("ticketing__create* and *__get* applied to github's issues__create_comment: %v", got)
	}
	l2 := Limits{Tools: map[string]Rate{"github*__create*": {PerSecond: 1}}}
	if got := l2.limitsFor("acme", &tool{Public: "github__issues__create_comment", Server: "github", Name: "issues__create_comment"}); len(got) != 0 {
		t.Errorf("github*__create* matched github's issues__create_comment (the policy does not): %v", got)
	}
	// The most specific pattern applies, not the first in sorted order ("*" sorts first).
	l.Tools = map[string]Rate{"*": {PerSecond: 50}, "kb__*": {PerSecond: 10}, "kb__get_*": {PerSecond: 3}, "kb__get_document": {PerSecond: 1}}
	for public, want := range map[string]float64{"kb__get_document": 1, "kb__get_other": 3, "kb__search": 10, "logging__tail": 50} {
		server, name, _ := strings.Cut(public, "__")
		got := l.limitsFor("acme", &tool{Public: public, Server: server, Name: name})
		if r := got[len(got)-1]; r.scope != subjects.LimitScopeTool || r.rate.PerSecond != want {
			t.Errorf("%s: got %+v, want the tool limit %v/s", public, r, want)
		}
	}
}

// newTestLimiter is a limiter on a real JetStream.
func newTestLimiter(t *testing.T, env *natstest.Env, cfg Config) *limiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ensureState(ctx, env.JS, cfg.withDefaults(), false)
	if err != nil {
		t.Fatal(err)
	}
	l := &limiter{js: env.JS, stream: st.limits, slots: st.slots, now: time.Now, owner: "test", prev: map[string]prevWindow{}}
	if st.slotTTLs {
		l.lease = cfg.withDefaults().SlotLease
	}
	return l
}

// A crashed worker's concurrency slot comes back after the lease.
func TestSlotLease(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{SlotLease: time.Second})
	lim := []scopeLimit{{subjects.LimitScopeServer, "s.1 odd*name", Rate{Concurrency: 1}}}
	ctx := context.Background()
	held, refusal, err := l.acquire(ctx, "a", lim)
	if err != nil || refusal != nil {
		t.Fatalf("first: %v %+v", err, refusal)
	}
	_, refusal, err = l.acquire(ctx, "b", lim)
	if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited || refusal.RetryAfterMs <= 0 {
		t.Fatalf("second: got %v %+v, want rate_limited with a retry-after", err, refusal)
	}
	// The holder renews: still held after more than a lease.
	for range 3 {
		time.Sleep(400 * time.Millisecond)
		held.renew(ctx)
	}
	if _, refusal, _ = l.acquire(ctx, "c", lim); refusal == nil {
		t.Fatal("a renewed slot was taken")
	}
	// The holder "crashes" (no renew, no release): the slot comes back.
	start := time.Now()
	waitFor(t, "slot freed by its lease", func() bool {
		ls, refusal, err := l.acquire(ctx, "d", lim)
		if err != nil {
			t.Fatal(err)
		}
		if refusal == nil {
			ls.release(ctx)
			return true
		}
		return false
	})
	t.Logf("slot back %s after the last renewal", time.Since(start).Round(10*time.Millisecond))
	held.release(ctx) // its revision is gone: deletes nothing
	ls, refusal, err := l.acquire(ctx, "e", lim)
	if err != nil || refusal != nil {
		t.Fatalf("after release: %v %+v", err, refusal)
	}
	ls.release(ctx)
}

// Rate limits and concurrency caps hold across two executor processes, each with its own
// connection and workers.
func TestLimitsAcrossWorkers(t *testing.T) {
	cases := []struct {
		name   string
		limits Limits
		tool   string
		args   string
		calls  int
		ok     int
	}{
		{name: "rate per tool", limits: Limits{Tools: map[string]Rate{"fixture__echo": {PerSecond: 0.01, Burst: 5}}}, // 5 per 500 s
			tool: "fixture__echo", args: `{"text":"hi"}`, calls: 24, ok: 5},
		{name: "rate per tenant", limits: Limits{Tenant: Rate{PerSecond: 0.01, Burst: 3}},
			tool: "fixture__echo", args: `{"text":"hi"}`, calls: 12, ok: 3},
		{name: "concurrency per server", limits: Limits{Servers: map[string]Rate{"*": {Concurrency: 2}}},
			tool: "fixture__slow", args: `{"ms":3000}`, calls: 6, ok: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
			var exs []*Executor
			for range 2 {
				exs = append(exs, r.startExecutor(r.managerConfig(Config{Limits: tc.limits, Workers: 3}), r.env.Connect(t)))
			}
			r.waitTool(tc.tool)
			var mu sync.Mutex
			codes := map[string]int{}
			var wg sync.WaitGroup
			for range tc.calls {
				wg.Go(func() {
					res := r.call("local", tc.tool, tc.args)
					code := res.Status
					if res.Error != nil {
						code = res.Error.Code
						if code == subjects.CodeRateLimited && res.Error.RetryAfterMs <= 0 {
							t.Errorf("rate_limited without retryAfterMs: %+v", res.Error)
						}
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if codes[subjects.CallOK] != tc.ok || codes[subjects.CodeRateLimited] != tc.calls-tc.ok {
				t.Errorf("got %v, want %d ok and %d rate_limited", codes, tc.ok, tc.calls-tc.ok)
			}
			for i, ex := range exs {
				if ex.Stats().Handled == 0 {
					t.Errorf("executor %d handled no call: the test did not exercise two workers", i)
				}
			}
		})
	}
}
