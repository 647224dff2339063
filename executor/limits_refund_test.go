package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// counterTotal sums the rate counters of s over the windows from..to (a test may cross a window
// boundary), after every increment and give-back published on l's connection was acknowledged.
func counterTotal(t *testing.T, l *limiter, s scopeLimit, from, to time.Time) int64 {
	t.Helper()
	select {
	case <-l.js.PublishAsyncComplete():
	case <-time.After(waitLimit):
		t.Fatal("async publishes not acknowledged")
	}
	_, w := s.rate.window()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var total int64
	for idx := from.UnixNano() / int64(w); idx <= to.UnixNano()/int64(w); idx++ {
		m, err := l.stream.GetLastMsgForSubject(ctx, counterSubject(s, idx))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var cv struct {
			Val string `json:"val"`
		}
		if err := json.Unmarshal(m.Data, &cv); err != nil {
			t.Fatalf("counter %s: %v", m.Subject, err)
		}
		v, err := strconv.ParseInt(cv.Val, 10, 64)
		if err != nil {
			t.Fatalf("counter %s: %v", m.Subject, err)
		}
		total += v
	}
	return total
}

// A call refused by a concurrency cap gives back what it counted against every rate (tenant and
// tool): retries against a busy cap do not use up the rate, and the counters hold exactly the
// calls that got through.
func TestRefundConcurrencyRefusal(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	tenant := scopeLimit{subjects.LimitScopeTenant, "acme", Rate{PerSecond: 0.01, Burst: 3}}             // 3 per 300 s
	tool := scopeLimit{subjects.LimitScopeTool, "s__t", Rate{PerSecond: 0.01, Burst: 3, Concurrency: 1}} // and 1 in flight
	lim := []scopeLimit{tenant, tool}
	ctx := context.Background()
	start := time.Now()

	held, refusal, err := l.acquire(ctx, "held", lim)
	if err != nil || refusal != nil {
		t.Fatalf("first: %v %+v", err, refusal)
	}
	for i := range 6 {
		_, refusal, err := l.acquire(ctx, "busy"+strconv.Itoa(i), lim)
		if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited || refusal.RetryAfterMs != concurrencyRetryAfter.Milliseconds() {
			t.Fatalf("retry %d while the slot is held: got %v %+v, want the concurrency refusal", i, err, refusal)
		}
	}
	for _, s := range lim {
		if got := counterTotal(t, l, s, start, time.Now()); got != 1 {
			t.Errorf("%s counter after 6 refusals: %d, want 1 (the call that runs)", s.scope, got)
		}
	}
	held.release(ctx)

	// The rate still allows 2 more calls, and no more.
	for i := range 2 {
		ls, refusal, err := l.acquire(ctx, "next"+strconv.Itoa(i), lim)
		if err != nil || refusal != nil {
			t.Fatalf("call %d after the slot was freed: got %v %+v; only %d calls ran, the rate allows 3", i+2, err, refusal, i+1)
		}
		ls.release(ctx)
	}
	_, refusal, err = l.acquire(ctx, "over", lim)
	if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited || refusal.RetryAfterMs <= concurrencyRetryAfter.Milliseconds() {
		t.Fatalf("4th call: got %v %+v, want rate_limited by the rate", err, refusal)
	}
	for _, s := range lim {
		if got := counterTotal(t, l, s, start, time.Now()); got != 3 {
			t.Errorf("%s counter: %d, want 3", s.scope, got)
		}
	}
}

// A call whose concurrency slot cannot be taken (slots bucket gone) or whose context ended
// while counting gives back its counts: no count is left behind, none is given back twice.
func TestRefundOnLimitErrors(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	rate := scopeLimit{subjects.LimitScopeTenant, "acme", Rate{PerSecond: 0.01, Burst: 3}}
	capped := scopeLimit{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}
	start := time.Now()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 4 {
		// Only an error can come: the previous window's count is read with ctx (never cached here).
		if _, refusal, err := l.acquire(canceled, "canceled"+strconv.Itoa(i), []scopeLimit{rate}); !errors.Is(err, ErrLimits) || refusal != nil {
			t.Fatalf("canceled %d: got %v %+v, want ErrLimits", i, err, refusal)
		}
	}
	// Give-backs of increments acknowledged after the context ended are published in the
	// background.
	waitFor(t, "counts of canceled calls given back", func() bool {
		return counterTotal(t, l, rate, start, time.Now()) == 0
	})

	ctx, cancelCtx := context.WithTimeout(context.Background(), waitLimit)
	defer cancelCtx()
	if err := env.JS.DeleteKeyValue(ctx, subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, refusal, err := l.acquire(ctx, "noslots"+strconv.Itoa(i), []scopeLimit{rate, capped}); !errors.Is(err, ErrLimits) || refusal != nil {
			t.Fatalf("without slots bucket: got %v %+v, want ErrLimits", err, refusal)
		}
	}
	if got := counterTotal(t, l, rate, start, time.Now()); got != 0 {
		t.Errorf("counter after calls refused for slot errors: %d, want 0", got)
	}
	// The counter is exact, not below 0: the rate allows 3 calls, and no more.
	for i := range 3 {
		if _, refusal, err := l.acquire(ctx, "ok"+strconv.Itoa(i), []scopeLimit{rate}); err != nil || refusal != nil {
			t.Fatalf("call %d: %v %+v", i+1, err, refusal)
		}
	}
	if _, refusal, err := l.acquire(ctx, "over", []scopeLimit{rate}); err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
		t.Fatalf("4th call: got %v %+v, want rate_limited", err, refusal)
	}
}

// A lease's counts are given back once, however often refund is called.
func TestRefundOnce(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	rate := scopeLimit{subjects.LimitScopeTool, "s__t", Rate{PerSecond: 0.01, Burst: 3}}
	ctx := context.Background()
	start := time.Now()
	for i := range 3 {
		ls, refusal, err := l.acquire(ctx, "c"+strconv.Itoa(i), []scopeLimit{rate})
		if err != nil || refusal != nil {
			t.Fatalf("call %d: %v %+v", i+1, err, refusal)
		}
		if i == 0 {
			continue // this one runs
		}
		ls.refund() // this one does not run after all
		ls.refund()
		ls.release(ctx)
		ls.refund()
	}
	if got := counterTotal(t, l, rate, start, time.Now()); got != 1 {
		t.Errorf("counter: %d, want 1", got)
	}
}

// Through an executor: calls refused by a busy concurrency cap (the slot held by another worker)
// leave the tool's and the tenant's rates intact.
func TestRefundConcurrencyRefusalThroughExecutor(t *testing.T) {
	limits := Limits{
		Tenant: Rate{PerSecond: 0.01, Burst: 3},
		Tools:  map[string]Rate{"fixture__slow": {PerSecond: 0.01, Burst: 3, Concurrency: 1}},
	}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Limits: limits}})
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	ctx := context.Background()
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "fixture__slow", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}
	for i := range 4 {
		res := r.call("local", "fixture__slow", `{"ms":1}`)
		if res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs != concurrencyRetryAfter.Milliseconds() {
			t.Fatalf("retry %d while the slot is held: got %s %+v, want the concurrency refusal", i, res.Status, res.Error)
		}
	}
	held.release(ctx)
	for i := range 3 {
		// The executor frees a call's slot just after answering it: the next call may still
		// find it busy, and retries until it is free (these retries are refunded too).
		waitFor(t, "call "+strconv.Itoa(i+1)+" after the slot was freed", func() bool {
			res := r.call("local", "fixture__slow", `{"ms":1}`)
			if res.Status == subjects.CallOK {
				return true
			}
			if res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs != concurrencyRetryAfter.Milliseconds() {
				t.Fatalf("call %d after the slot was freed: got %s %+v; only %d calls ran, the rate allows 3", i+1, res.Status, res.Error, i)
			}
			return false
		})
	}
	res := r.call("local", "fixture__slow", `{"ms":1}`)
	if res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs <= concurrencyRetryAfter.Milliseconds() {
		t.Fatalf("4th call: got %s %+v, want rate_limited by the rate", res.Status, res.Error)
	}
}
