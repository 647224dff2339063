package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// busyDispatcher answers its first `busy` dispatches as a connector does a server's HTTP 429
// with Retry-After (unavailable: nothing ran, retryAfterMs), then ok; it records when each came.
type busyDispatcher struct {
	busy       int
	retryAfter time.Duration
	mu         sync.Mutex
	at         []time.Time
}

func (d *busyDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	d.at = append(d.at, time.Now())
	n := len(d.at)
	d.mu.Unlock()
	if n <= d.busy {
		return subjects.DispatchReply{V: 1, Error: &subjects.Error{Code: subjects.CodeUnavailable,
			Message: "the server refused the request with HTTP 429 (Too Many Requests); nothing ran", RetryAfterMs: d.retryAfter.Milliseconds()}}
	}
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

func (d *busyDispatcher) times() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}

// A server that answers 429 or 503 with Retry-After says when to come back: the executor's
// retries of such a refusal (unavailable: nothing ran, so any tool is retried) came after 50,
// 100, 200 ms of backoff whatever it asked, adding load to a server that is shedding it.
func TestRetryHonoursRetryAfter(t *testing.T) {
	const rate = "fixture__echo"
	limits := Limits{Tools: map[string]Rate{rate: {PerSecond: 0.01, Burst: 3}}}
	rateOf := scopeLimit{subjects.LimitScopeTool, rate, limits.Tools[rate]}

	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		timeoutMs  int64
	}{
		{"past the deadline", time.Minute, 5000},
		// Within the deadline, but a worker (and the call's slot) would wait that long: every
		// worker of the executor, if the server answers every call so.
		{"longer than a worker waits", 3 * time.Second, 0},
	} {
		t.Run(tc.name+": answered at once, with retryAfterMs", func(t *testing.T) {
			disp := &busyDispatcher{busy: 100, retryAfter: tc.retryAfter}
			r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, Limits: limits}})
			start := time.Now()
			res := r.call("local", rate, `{"text":"hi"}`, func(req *subjects.CallRequest) { req.TimeoutMs = tc.timeoutMs })
			if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable || res.Error.RetryAfterMs != tc.retryAfter.Milliseconds() {
				t.Fatalf("got %s %+v, want refused unavailable with retryAfterMs %d", res.Status, res.Error, tc.retryAfter.Milliseconds())
			}
			if n := len(disp.times()); n != 1 {
				t.Errorf("dispatched %d times, want 1: the server asked for %s", n, tc.retryAfter)
			}
			// The call reached the server (which refused it): it counts against the rate, once.
			if got := counterTotal(t, r.ex.lim, rateOf, start, time.Now()); got != 1 {
				t.Errorf("rate counter: %d, want 1", got)
			}
		})
	}

	t.Run("within the deadline: retried once the server allows", func(t *testing.T) {
		const wait = maxRetryWait // more than the first backoff (at most 75 ms; 750 ms before it was set right)
		disp := &busyDispatcher{busy: 1, retryAfter: wait}
		r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, Limits: limits}})
		start := time.Now()
		res := r.call("local", rate, `{"text":"hi"}`)
		if res.Status != subjects.CallOK {
			t.Fatalf("got %s %+v, want ok on the retry", res.Status, res.Error)
		}
		at := disp.times()
		if len(at) != 2 {
			t.Fatalf("dispatched %d times, want 2", len(at))
		}
		// A lower bound only: the executor sleeps at least this long, however loaded the machine.
		if gap := at[1].Sub(at[0]); gap < wait {
			t.Errorf("retried %s after the refusal, want at least the %s the server asked for", gap, wait)
		}
		if res.Attempts != 2 {
			t.Errorf("attempts: %d, want 2", res.Attempts)
		}
		if got := counterTotal(t, r.ex.lim, rateOf, start, time.Now()); got != 1 {
			t.Errorf("rate counter: %d, want 1 (one call, whatever its attempts)", got)
		}
	})
}

// Only the server's retryAfterMs ends the retries early, not the backoff's jitter: with a
// RetryMax that lets the backoff reach its 1 s bound, a randomised wait of up to 1.5 s was
// taken for a server asking for more than a worker waits, and the call was answered after a
// random number of attempts, with no retryAfterMs at all.
func TestRetryBackoffJitterIsNotRetryAfter(t *testing.T) {
	t.Parallel()        // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	const attempts = 14 // the backoff reaches 1 s at the 9th wait (50 ms × 1.5^n)
	disp := &busyDispatcher{busy: 100}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, RetryMax: attempts}})
	res := r.call("local", "fixture__echo", `{"text":"hi"}`, func(req *subjects.CallRequest) { req.TimeoutMs = 60_000 })
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("got %s %+v, want refused unavailable", res.Status, res.Error)
	}
	if n := len(disp.times()); n != attempts || res.Attempts != attempts {
		t.Errorf("dispatched %d times (attempts %d), want %d: nothing asked to stop earlier", n, res.Attempts, attempts)
	}
}
