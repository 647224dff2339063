package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// seedDispatcher stands for the servers: it counts the calls each limited key has in flight
// (as the server sees them: from the request's arrival to its answer, which it gives even when
// the executor's context ends first) and the calls that reached it, by call id.
type seedDispatcher struct {
	mu       sync.Mutex
	rng      *rand.Rand
	keys     map[string][]string // call id → the keys it counts under (scope + "\x00" + key)
	caps     map[string]int      // key → its concurrency cap
	inflight map[string]int
	over     []string // concurrency caps exceeded
	runs     map[string]int
	ran      map[string]time.Time // call id → when it reached the server
	unknown  []string             // call ids the test never sent
	notSent  map[string]bool      // call ids answered "nothing was sent" (they never ran)
	quiet    bool                 // every call is sent
}

// expect records that call id, sent next, counts under keys.
func (d *seedDispatcher) expect(id string, keys []string) {
	d.mu.Lock()
	d.keys[id] = keys
	d.mu.Unlock()
}

// limitKeys are the keys (scope + "\x00" + key) a call of t by tenant counts under.
func limitKeys(limits Limits, tenant string, t *tool) []string {
	var keys []string
	for _, s := range limits.limitsFor(tenant, t) {
		keys = append(keys, s.scope+"\x00"+s.key)
	}
	return keys
}

func (d *seedDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	keys, ok := d.keys[req.CallID]
	if !ok {
		d.unknown = append(d.unknown, req.CallID)
	}
	if !d.quiet && d.rng.IntN(10) == 0 {
		// The connector could not send it: it never ran, and gives its counts back.
		d.notSent[req.CallID] = true
		d.mu.Unlock()
		return subjects.DispatchReply{V: subjects.Version, NotSent: true,
			Error: &subjects.Error{Code: subjects.CodeUnavailable, RetryAfterMs: 5000, Message: "server busy; nothing was sent"}}
	}
	d.runs[req.CallID]++
	if _, ok := d.ran[req.CallID]; !ok {
		d.ran[req.CallID] = time.Now()
	}
	for _, k := range keys {
		d.inflight[k]++
		if c := d.caps[k]; c > 0 && d.inflight[k] > c {
			d.over = append(d.over, fmt.Sprintf("%s: %d in flight, cap %d", strings.ReplaceAll(k, "\x00", " "), d.inflight[k], c))
		}
	}
	sleep := time.Duration(d.rng.IntN(60)) * time.Millisecond
	d.mu.Unlock()
	time.Sleep(sleep) // the server finishes what it started, whatever the caller does
	d.mu.Lock()
	for _, k := range keys {
		d.inflight[k]--
	}
	d.mu.Unlock()
	return subjects.DispatchReply{V: subjects.Version, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}],"isError":true}`)}
}

// seedTools are the tools of the seeded test, with valid arguments.
var seedTools = []struct{ public, args string }{
	{"fixture__echo", `{"text":"x"}`},
	{"fixture__slow", `{"ms":1}`},
	{"kb__search_knowledge_base", `{"query":"refund"}`},
	{"kb__get_document", `{"id":"POL-TRAVEL"}`},
	{"logging__getLogStats", `{}`},
	{"logging__getLogs", `{"level":"error","since":0,"limit":1}`},
	{"fixture__wipe", `{}`}, // destructive: needs approval
}

// randomRate is a rate with windows of 100 ms to about 1 s, or a concurrency cap, or both.
func randomRate(rng *rand.Rand) Rate {
	var r Rate
	if rng.IntN(4) > 0 {
		r.PerSecond = []float64{2, 3, 5, 8, 12, 20}[rng.IntN(6)]
		if rng.IntN(2) == 0 {
			r.Burst = 1 + rng.IntN(5)
		}
	}
	if r.PerSecond == 0 || rng.IntN(3) == 0 {
		r.Concurrency = 1 + rng.IntN(3)
	}
	return r
}

func randomLimits(rng *rand.Rand) Limits {
	var l Limits
	if rng.IntN(2) == 0 {
		l.Tenant = randomRate(rng)
	}
	for _, s := range []string{"*", "fixture", "kb", "logging"} {
		if rng.IntN(3) == 0 {
			if l.Servers == nil {
				l.Servers = map[string]Rate{}
			}
			l.Servers[s] = randomRate(rng)
		}
	}
	for _, p := range []string{"*", "fixture__*", "*__get*", "kb__search*", "fixture__echo", "logging__getLogs", "*__*s"} {
		if rng.IntN(3) == 0 {
			if l.Tools == nil {
				l.Tools = map[string]Rate{}
			}
			l.Tools[p] = randomRate(rng)
		}
	}
	return l
}

// seedResult is one call's answer as the caller saw it.
type seedResult struct {
	id, tenant, tool string
	sent, answered   time.Time
	res              subjects.CallResult
	invalid          bool // sent with invalid arguments
}

// TestLimitsSeeded: random limits (rates per tenant, server and tool pattern, concurrency caps,
// overlapping) on 2 or 3 executors sharing one JetStream, random calls of several tenants,
// servers and tools. Per seed: no key admits more calls in a window than its rate allows (each
// fixed window's counter holds at most n), no key has more calls in flight at the server than
// its cap, every refusal is rate_limited by a limit of the call with a sensible retryAfterMs,
// a call without limits is never refused, every call is answered once and dispatched at most
// once, and the counters hold exactly the calls that ran (a refused call, or one refused
// invalid_arguments, takes no count). Then, quiet, a call retried after its retryAfterMs runs.
// MCPSTREAM_TEST_LIMIT_SEEDS=N runs N seeds (default 3).
func TestLimitsSeeded(t *testing.T) {
	first, seeds := envSeeds("MCPSTREAM_TEST_LIMIT", 3)
	r := startRig(t, rigOptions{servers: []string{"fixture", "kb", "logging"}, noExecutor: true})
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) { runLimitsSeed(t, r, seed) })
	}
}

func runLimitsSeed(t *testing.T, r *rig, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x11))
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	// Every seed starts from empty counters and free slots.
	if s, err := r.env.JS.Stream(ctx, subjects.LimitsStream); err == nil {
		if err := s.Purge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if kv, err := r.env.JS.KeyValue(ctx, subjects.SlotsBucket); err == nil {
		if keys, err := kv.Keys(ctx); err == nil {
			for _, k := range keys {
				kv.Purge(ctx, k)
			}
		}
	}
	limits := randomLimits(rng)
	t.Logf("limits: %+v", limits)
	d := &seedDispatcher{rng: rand.New(rand.NewPCG(seed, 0x22)), keys: map[string][]string{}, caps: map[string]int{},
		inflight: map[string]int{}, runs: map[string]int{}, ran: map[string]time.Time{}, notSent: map[string]bool{}}
	cfg := r.managerConfig(Config{Limits: limits, Workers: 4, Dispatcher: d})
	nex := 2 + rng.IntN(2)
	type running struct {
		ex   *Executor
		stop context.CancelFunc
		done chan error
	}
	var exs []running
	for range nex {
		c := cfg
		c.Log = testLogger(t).With().Str("role", "executor").Logger()
		ex, err := New(r.env.Connect(t), c)
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ex.Run(rctx) }()
		exs = append(exs, running{ex, stop, done})
	}
	t.Cleanup(func() {
		for _, x := range exs {
			x.stop()
			select {
			case <-x.done:
			case <-time.After(waitLimit):
				t.Errorf("executor did not stop")
			}
		}
	})
	waitFor(t, "executors ready", func() bool {
		for _, x := range exs {
			if !x.ex.Ready() {
				return false
			}
			for _, tl := range seedTools {
				if x.ex.reg.lookup(tl.public) == nil {
					return false
				}
			}
		}
		return true
	})
	lookup := exs[0].ex.reg.lookup
	tenants := []string{"acme", "globex", "initech"}
	// The keys of every call the test may send, and their caps.
	rates := map[string]Rate{}
	for _, tenant := range tenants {
		for _, tl := range seedTools {
			for _, s := range limits.limitsFor(tenant, lookup(tl.public)) {
				k := s.scope + "\x00" + s.key
				rates[k] = s.rate
				d.caps[k] = s.rate.Concurrency
			}
		}
	}

	start := time.Now()
	var mu sync.Mutex
	var results []seedResult
	var wg sync.WaitGroup
	callers := 6 + rng.IntN(6)
	stopAt := -1 // an executor stopped while calls run
	if rng.IntN(2) == 0 {
		stopAt = rng.IntN(nex)
	}
	for i := range callers {
		crng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		wg.Go(func() {
			for n := 0; n < 25 && time.Since(start) < 2*time.Second; n++ {
				tenant := tenants[crng.IntN(len(tenants))]
				tl := seedTools[crng.IntN(len(seedTools))]
				args, invalid := tl.args, crng.IntN(10) == 0 && tl.public == "fixture__echo"
				if invalid {
					args = `{}`
				}
				id := NewCallID()
				d.expect(id, limitKeys(limits, tenant, lookup(tl.public)))
				sr := seedResult{id: id, tenant: tenant, tool: tl.public, sent: time.Now(), invalid: invalid}
				cctx, ccancel := context.WithTimeout(context.Background(), waitLimit)
				if tl.public == "fixture__wipe" {
					// Approved or denied a moment after it asks.
					approve, after := crng.IntN(3) > 0, time.Duration(crng.IntN(150))*time.Millisecond
					wg.Go(func() {
						time.Sleep(after)
						for range 200 {
							rep, err := r.client.Decide(cctx, subjects.Approval{ID: id, Tenant: tenant, Approve: approve})
							if err == nil && rep.OK || cctx.Err() != nil {
								return
							}
							time.Sleep(20 * time.Millisecond)
						}
					})
				}
				res, err := r.client.Call(cctx, tenant, subjects.CallRequest{ID: id, Tool: tl.public, Arguments: json.RawMessage(args),
					Principal: subjects.Principal{User: "local"}})
				ccancel()
				if err != nil {
					t.Errorf("call %s %s: %v", tenant, tl.public, err)
					return
				}
				sr.answered, sr.res = time.Now(), res
				mu.Lock()
				results = append(results, sr)
				mu.Unlock()
				if res.Error != nil && res.Error.Code == subjects.CodeRateLimited && crng.IntN(2) == 0 {
					time.Sleep(time.Duration(res.Error.RetryAfterMs) * time.Millisecond)
				} else {
					time.Sleep(time.Duration(crng.IntN(30)) * time.Millisecond)
				}
			}
		})
	}
	if stopAt >= 0 {
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		t.Logf("stopping executor %d", stopAt)
		exs[stopAt].stop()
	}
	wg.Wait()
	end := time.Now()

	// Every call answered once, dispatched at most once (answered ok if and only if it ran).
	codes := map[string]int{}
	for _, sr := range results {
		code := sr.res.Status
		if sr.res.Error != nil {
			code = sr.res.Error.Code
		}
		codes[code]++
		d.mu.Lock()
		runs, notSent := d.runs[sr.id], d.notSent[sr.id]
		d.mu.Unlock()
		switch {
		case runs > 1:
			t.Errorf("call %s (%s %s) reached the server %d times", sr.id, sr.tenant, sr.tool, runs)
		case sr.invalid:
			if sr.res.Error == nil || sr.res.Error.Code != subjects.CodeInvalidArguments || runs != 0 {
				t.Errorf("call %s with invalid arguments: %s %+v, runs %d", sr.id, sr.res.Status, sr.res.Error, runs)
			}
		case sr.res.Status == subjects.CallOK:
			if runs != 1 {
				t.Errorf("call %s answered ok, ran %d times", sr.id, runs)
			}
		case sr.res.Error != nil && sr.res.Error.Code == subjects.CodeDenied && sr.tool == "fixture__wipe":
			if runs != 0 {
				t.Errorf("call %s denied, ran %d times", sr.id, runs)
			}
		case sr.res.Error != nil && sr.res.Error.Code == subjects.CodeUnavailable && runs == 0 && notSent:
		case sr.res.Error != nil && sr.res.Error.Code == subjects.CodeRateLimited:
			if runs != 0 {
				t.Errorf("call %s refused rate_limited, ran %d times", sr.id, runs)
			}
			checkRefusal(t, limits, lookup, sr)
		default:
			t.Errorf("call %s (%s %s): %s %+v", sr.id, sr.tenant, sr.tool, sr.res.Status, sr.res.Error)
		}
	}
	t.Logf("%d executors, %d callers, %d calls in %s: %v", nex, callers, len(results), end.Sub(start).Round(time.Millisecond), codes)
	d.mu.Lock()
	for _, o := range d.over {
		t.Errorf("concurrency cap exceeded: %s", o)
	}
	if len(d.unknown) > 0 {
		t.Errorf("dispatched call ids the test never sent: %v", d.unknown)
	}
	// Rates: each key's calls, counted in windows of its rate (by the time they were sent
	// and reached the server: they were counted in between), at most n per window.
	byKey := map[string][]seedResult{}
	for _, sr := range results {
		if _, ok := d.ran[sr.id]; !ok {
			continue
		}
		for _, k := range d.keys[sr.id] {
			byKey[k] = append(byKey[k], sr)
		}
	}
	d.mu.Unlock()
	ranAt := func(id string) time.Time {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.ran[id]
	}
	const skew = 20 * time.Millisecond // the measured offset of the server's clock (same host)
	for k, rate := range rates {
		n, w := rate.window()
		if n == 0 {
			continue
		}
		calls := byKey[k]
		// Every window overlapping the run: n each.
		windows := (end.Add(skew).UnixNano()/int64(w) - start.Add(-skew).UnixNano()/int64(w)) + 1
		if int64(len(calls)) > n*windows {
			t.Errorf("%s: %d calls ran in %s, over %d windows of %d per %s", strings.ReplaceAll(k, "\x00", " "), len(calls), end.Sub(start), windows, n, w)
		}
		// Calls known to have been counted in one window: at most n.
		perWindow := map[int64]int64{}
		for _, sr := range calls {
			lo, hi := sr.sent.Add(-skew).UnixNano()/int64(w), ranAt(sr.id).Add(skew).UnixNano()/int64(w)
			if lo == hi {
				perWindow[lo]++
			}
		}
		for idx, c := range perWindow {
			if c > n {
				t.Errorf("%s: %d calls ran in window %d (%s), the rate allows %d", strings.ReplaceAll(k, "\x00", " "), c, idx, w, n)
			}
		}
		// The counters hold exactly the calls that ran: refused calls gave their counts back.
		s := scopeLimit{scope: k[:strings.IndexByte(k, 0)], key: k[strings.IndexByte(k, 0)+1:], rate: rate}
		var total int64
		for range 50 {
			total = seedCounterTotal(t, r, s, start.Add(-time.Second), time.Now().Add(time.Second))
			if total == int64(len(calls)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if total != int64(len(calls)) {
			t.Errorf("%s: the counters hold %d calls, %d ran", strings.ReplaceAll(k, "\x00", " "), total, len(calls))
		}
	}

	// Quiet: a call refused by a rate, retried after its retryAfterMs, runs.
	d.mu.Lock()
	d.quiet = true
	d.mu.Unlock()
	for _, tenant := range tenants[:2] {
		tl := seedTools[rng.IntN(len(seedTools)-1)] // (not fixture__wipe, the last: no approver now)
		for range 8 {
			id := NewCallID()
			keys := limitKeys(limits, tenant, lookup(tl.public))
			d.expect(id, keys)
			res := r.call(tenant, tl.public, tl.args, func(req *subjects.CallRequest) { req.ID = id })
			if res.Status == subjects.CallOK {
				continue
			}
			if res.Error == nil || res.Error.Code != subjects.CodeRateLimited || res.Error.RetryAfterMs <= 0 {
				t.Fatalf("quiet call of %s by %s: %s %+v", tl.public, tenant, res.Status, res.Error)
			}
			time.Sleep(time.Duration(res.Error.RetryAfterMs) * time.Millisecond)
			id = NewCallID()
			d.expect(id, keys)
			again := r.call(tenant, tl.public, tl.args, func(req *subjects.CallRequest) { req.ID = id })
			if again.Status != subjects.CallOK {
				for i, x := range exs {
					t.Logf("executor %d: offset of the server's clock %s", i, time.Duration(x.ex.lim.offset.Load()))
				}
				t.Errorf("%s by %s retried after retryAfterMs %d (refused: %s): %s %+v", tl.public, tenant, res.Error.RetryAfterMs, res.Error.Message, again.Status, again.Error)
			}
		}
	}
}

// checkRefusal checks a rate_limited answer: it names a limit of the call, and its
// retryAfterMs is positive and at most the limit's window (a rate) or the concurrency poll.
func checkRefusal(t *testing.T, limits Limits, lookup func(string) *tool, sr seedResult) {
	t.Helper()
	e := sr.res.Error
	if e.RetryAfterMs <= 0 {
		t.Errorf("call %s refused without retryAfterMs: %+v", sr.id, e)
	}
	if sr.tool == "fixture__wipe" && strings.Contains(e.Message, "calls already wait for approval on this executor") {
		return // (Workers/2 calls wait for approval per executor at most)
	}
	for _, s := range limits.limitsFor(sr.tenant, lookup(sr.tool)) {
		if s.rate.Concurrency > 0 && strings.HasPrefix(e.Message, fmt.Sprintf("%s %s has ", s.scope, s.key)) {
			if e.RetryAfterMs != concurrencyRetryAfter.Milliseconds() {
				t.Errorf("call %s refused by a cap with retryAfterMs %d", sr.id, e.RetryAfterMs)
			}
			return
		}
		if n, w := s.rate.window(); n > 0 && e.Message == fmt.Sprintf("%s %s is limited to %d calls per %s", s.scope, s.key, n, w) {
			if e.RetryAfterMs > w.Milliseconds()+1 {
				t.Errorf("call %s refused by %s %s (%d per %s) with retryAfterMs %d", sr.id, s.scope, s.key, n, w, e.RetryAfterMs)
			}
			return
		}
	}
	t.Errorf("call %s (%s %s) refused by no limit of its own: %+v", sr.id, sr.tenant, sr.tool, e)
}

// seedCounterTotal sums a key's counters over from..to.
func seedCounterTotal(t *testing.T, r *rig, s scopeLimit, from, to time.Time) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	stream, err := r.env.JS.Stream(ctx, subjects.LimitsStream)
	if err != nil {
		t.Fatal(err)
	}
	_, w := s.rate.window()
	var total int64
	for idx := from.UnixNano() / int64(w); idx <= to.UnixNano()/int64(w); idx++ {
		m, err := stream.GetLastMsgForSubject(ctx, counterSubject(s, idx))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var cv struct {
			Val string `json:"val"`
		}
		json.Unmarshal(m.Data, &cv)
		v, _ := strconv.ParseInt(cv.Val, 10, 64)
		total += v
	}
	return total
}
