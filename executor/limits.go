package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// ErrLimits is returned when the limits cannot be checked (JetStream unreachable): the call is
// refused rather than let through unchecked.
var ErrLimits = errors.New("limits unavailable")

// Bounds of rate windows.
const (
	minWindow = 100 * time.Millisecond
	maxWindow = 10 * time.Minute
	// maxWindowCalls caps the calls per window of a rate without Burst: 2^53, the largest count
	// a float64 estimate still holds exactly (no limit in practice).
	maxWindowCalls = 1 << 53
	// concurrencyRetryAfter is the retry-after of a call refused by a concurrency cap.
	concurrencyRetryAfter = 250 * time.Millisecond
)

// window returns the sliding window of a rate: n calls per w, with n = Burst (or
// max(1, ceil(PerSecond))) and w = n/PerSecond clamped to [minWindow, maxWindow]. n is not
// scaled when w is clamped, so a clamped rate does not average PerSecond: a window stretched to
// minWindow allows fewer calls ({PerSecond: 1000, Burst: 1} is 1 per 100 ms, 10/s: Burst must be
// at least PerSecond/10 for the average to be PerSecond), and a window shortened to maxWindow
// allows more ({PerSecond: 0.0001, Burst: 10} is 10 per 10 min).
func (r Rate) window() (n int64, w time.Duration) {
	if r.PerSecond <= 0 {
		return 0, 0
	}
	n = int64(r.Burst)
	if n <= 0 {
		// Capped as a float: past the int64 range the conversion gives anything (the most
		// negative int64 on amd64: a rate of 1e19/s became 1 call per 100 ms).
		n = max(1, int64(min(math.Ceil(r.PerSecond), maxWindowCalls)))
	}
	// Clamped as a float: a float64 out of a Duration's range converts to anything (the most
	// negative Duration on amd64, which would make a very slow rate the fastest window).
	secs := min(max(float64(n)/r.PerSecond, minWindow.Seconds()), maxWindow.Seconds())
	return n, time.Duration(secs * float64(time.Second))
}

// check refuses a rate New cannot apply: a NaN PerSecond converts to a negative window (one
// window that never ends: Burst calls, then every call refused for good).
func (l Limits) check() error {
	bad := func(where string, r Rate) error {
		if math.IsNaN(r.PerSecond) {
			return fmt.Errorf("%w: limits %s: perSecond is NaN", ErrConfig, where)
		}
		return nil
	}
	errs := []error{bad("tenant", l.Tenant)}
	for k, r := range l.Servers {
		errs = append(errs, bad("servers."+k, r))
	}
	for k, r := range l.Tools {
		errs = append(errs, bad("tools."+k, r))
	}
	return errors.Join(errs...)
}

// scopeLimit is one limit that applies to a call.
type scopeLimit struct {
	scope string // subjects.LimitScope...
	key   string // tenant, server or public tool name
	rate  Rate
}

// limitsFor returns the limits of a call of tool t by tenant.
func (l Limits) limitsFor(tenant string, t *tool) []scopeLimit {
	var out []scopeLimit
	if l.Tenant != (Rate{}) {
		out = append(out, scopeLimit{subjects.LimitScopeTenant, tenant, l.Tenant})
	}
	if r, ok := l.Servers[t.Server]; ok {
		out = append(out, scopeLimit{subjects.LimitScopeServer, t.Server, r})
	} else if r, ok := l.Servers["*"]; ok {
		out = append(out, scopeLimit{subjects.LimitScopeServer, t.Server, r})
	}
	if len(l.Tools) > 0 {
		pats := l.order
		if pats == nil {
			pats = specificFirst(l.Tools)
		}
		for _, p := range pats {
			if policy.MatchTool(p, t.Server, t.Name) {
				out = append(out, scopeLimit{subjects.LimitScopeTool, t.Public, l.Tools[p]})
				break
			}
		}
	}
	return out
}

// specificFirst returns the patterns of tools, the most specific first: exact names, then the
// longest patterns ("*" sorted first used to override every more specific one).
func specificFirst(tools map[string]Rate) []string {
	pats := make([]string, 0, len(tools))
	for p := range tools {
		pats = append(pats, p)
	}
	sort.Slice(pats, func(i, j int) bool {
		wi, wj := strings.ContainsAny(pats[i], "*?["), strings.ContainsAny(pats[j], "*?[")
		switch {
		case wi != wj:
			return !wi
		case len(pats[i]) != len(pats[j]):
			return len(pats[i]) > len(pats[j])
		}
		return pats[i] < pats[j]
	})
	return pats
}

// maxWindowOf is the longest rate window of the limits (the counters' retention follows it).
func (l Limits) maxWindowOf() time.Duration {
	var m time.Duration
	add := func(r Rate) {
		if _, w := r.window(); w > m {
			m = w
		}
	}
	add(l.Tenant)
	for _, r := range l.Servers {
		add(r)
	}
	for _, r := range l.Tools {
		add(r)
	}
	return m
}

// limiter enforces Limits across every worker of every process:
//
//   - rates with sliding-window counters in the counter stream subjects.LimitsStream: each call
//     adds 1 to its window's counter (Nats-Incr; the PubAck carries the new total) and the
//     estimate ⌊prev×(1−elapsed)⌋ + current must stay within the limit, else the call gives its
//     1 back and is refused with the time until the estimate allows it (see rateWait, giveBack);
//   - concurrency with leases in the KV bucket subjects.SlotsBucket: slot keys scope.key.0 … n−1,
//     taken with Create (atomic; see takeSlot), renewed while the call runs, deleted when it
//     ends; a slot's TTL frees the slot of a worker that crashed: the call's timeout plus the
//     lease and a second from when it is taken, then what is left of it and the lease at each
//     renewal, and at least the dispatch's deadline plus the lease (see holdUntil), the
//     connector running the call on until then whatever becomes of the worker.
type limiter struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	slots  jetstream.KeyValue
	now    func() time.Time
	owner  string
	// lease is the TTL each slot is written with (per-key TTLs, see ensureSlots); 0: the
	// bucket's TTL is the lease, and a dispatched call's slot is not held past it. Read with
	// leaseTTL: a restore sets it again (setLease), as the bucket declared again takes per-key
	// TTLs or not.
	lease   time.Duration
	leaseMu sync.RWMutex

	mu   sync.Mutex
	prev map[string]prevWindow // counter subject prefix → previous window's final count

	// restore declares the limits stream and the slots bucket again when they are gone (see
	// stateLost), and makes the limiter follow them as declared (setLease); nil: never.
	restore func(context.Context) error
	// restoreBound bounds a restore with the live leases' retake (0: restoreWait).
	restoreBound time.Duration
	restoreMu    sync.Mutex
	restoredAt   time.Time // when restore was last tried
	// restoreErr is what it then returned (nil: none; cleared too by a call that took its
	// slots, or, with uncapped, one that was counted: the state is back); read without
	// restoreMu by the calls that find a try running after a failure (see restoreState).
	restoreErr atomic.Pointer[error]
	// uncapped: no limit has a concurrency cap, no call takes a slot (none would clear
	// restoreErr): a call the counters answered clears it (see checkRates).
	uncapped bool
	// restoring is held by takeSlots (a call with a cap), and by restoreState (exclusively)
	// while it declares the state again and the live leases take their slots again: no call
	// takes a slot of a bucket declared again before the calls in flight have theirs back.
	restoring sync.RWMutex
	// restoreWaited, when set (tests), is called as a call begins to wait for a restore.
	restoreWaited func()
	liveMu        sync.Mutex
	live          map[*lease]struct{} // the leases holding slots (taken, not released)

	// serverTime reads the NATS server's clock (the limits stream's: see windowNow); nil: the
	// rate windows follow now alone.
	serverTime func(context.Context) (time.Time, error)
	offset     atomic.Int64 // the server's clock less now, in nanoseconds (see syncClock)
	clockMu    sync.Mutex
	clockKnown bool      // an offset was measured
	clockTried time.Time // when it was last measured or tried (time.Now)
	clockBusy  bool      // a measurement runs in the background
}

// Measuring the server's clock (see syncClock).
const (
	clockSyncEvery   = 30 * time.Second // measured again after this
	clockSyncRetry   = time.Second      // tried again after a failure
	clockSyncTimeout = 2 * time.Second
	// clockSyncMaxRTT: a measurement whose round trip took longer is not taken (its offset
	// could be off by half of it).
	clockSyncMaxRTT = 250 * time.Millisecond
	// clockSyncSamples round trips at most per measurement, the quickest taken; one within
	// clockSyncQuickRTT (an offset off by half a millisecond at most) ends it.
	clockSyncSamples  = 5
	clockSyncQuickRTT = time.Millisecond
)

// windowNow is the time that says which rate window a call counts in: the NATS server's clock,
// as measured from this host's (now plus the offset syncClock measured). Each executor counted
// in the window of its own host's clock, so executors whose clocks disagreed by more than a
// window counted in different windows and never saw each other's calls: each allowed the whole
// rate. Until an offset is measured (the server cannot be asked), the host's clock.
func (l *limiter) windowNow(ctx context.Context) time.Time {
	if l.serverTime != nil {
		l.syncClock(ctx)
	}
	return l.now().Add(time.Duration(l.offset.Load()))
}

// syncClock measures the offset of the server's clock from now: at the first call (which
// waits for it, as do calls meanwhile), then every clockSyncEvery, or clockSyncRetry after a
// failure, in the background (calls go on with the offset they have).
func (l *limiter) syncClock(ctx context.Context) {
	l.clockMu.Lock()
	defer l.clockMu.Unlock()
	if l.clockTried.IsZero() {
		l.clockTried = time.Now()
		if off, ok := l.measureClock(ctx); ok {
			l.offset.Store(int64(off))
			l.clockKnown = true
		}
		return
	}
	every := clockSyncEvery
	if !l.clockKnown {
		every = clockSyncRetry
	}
	if l.clockBusy || time.Since(l.clockTried) < every {
		return
	}
	l.clockTried, l.clockBusy = time.Now(), true
	go func() {
		off, ok := l.measureClock(context.Background())
		l.clockMu.Lock()
		defer l.clockMu.Unlock()
		if ok {
			l.offset.Store(int64(off))
			l.clockKnown = true
		}
		l.clockBusy = false
	}()
}

// serverSince is how long ago t was, a time on the NATS server's clock (a stored message's or
// key's timestamp): now plus the offset syncClock measured, less t (0 if t is later). ok is
// false when no offset is known: the server could not be asked, or the limiter follows a clock
// of its own (the rateClock hook).
func (l *limiter) serverSince(ctx context.Context, t time.Time) (time.Duration, bool) {
	if l.serverTime == nil {
		return 0, false
	}
	l.syncClock(ctx)
	l.clockMu.Lock()
	known := l.clockKnown
	l.clockMu.Unlock()
	if !known {
		return 0, false
	}
	return max(l.now().Add(time.Duration(l.offset.Load())).Sub(t), 0), true
}

// measureClock asks the server for its time and returns how far it is ahead of now, taking
// each answer as given halfway through its round trip, which puts the offset off by up to half
// of it: of up to clockSyncSamples round trips (fewer once one is quick), the quickest counts.
// With one, a round trip slowed on one side (CPU contention as executors start, a pause) put
// executors on the same clock tens of milliseconds apart: a call one of them refused, retried
// after its retryAfterMs on another, came early on that one's clock and was refused again.
func (l *limiter) measureClock(ctx context.Context) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, clockSyncTimeout)
	defer cancel()
	var off, best time.Duration
	found := false
	for range clockSyncSamples {
		sent, start := l.now(), time.Now()
		ts, err := l.serverTime(ctx)
		rtt := time.Since(start)
		if err != nil || ts.IsZero() || rtt > clockSyncMaxRTT {
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if !found || rtt < best {
			off, best, found = ts.Sub(sent.Add(rtt/2)), rtt, true
		}
		if best <= clockSyncQuickRTT {
			break
		}
	}
	return off, found
}

type prevWindow struct {
	idx int64
	val int64
	// settled: read once window idx+1 had run prevSettle (a quarter of a shorter window), when
	// the give-backs of the calls refused at the end of window idx are in (see previous).
	settled bool
}

// prevSettle is how long into a window (a quarter of a shorter window) the count of the window
// before may still change: by the give-backs of the calls refused at its end (published as
// they are refused, they land within milliseconds), and by the increments of calls counted at
// its very end.
const prevSettle = time.Second

// lease is what a call holds while it runs.
type lease struct {
	l       *limiter
	mu      sync.Mutex
	slots   []slotLease
	counted []increment // what this call added to the rate counters (for refund)
	// hold is the latest deadline the call may be dispatched with (from its timeout when the
	// slots were taken, then the dispatch's: holdUntil): its slots are held until hold plus
	// the lease.
	hold time.Time
	// val is what its slots hold (slotValue): a slot that holds it is this lease's, also at a
	// revision the lease does not know (see ownRevision).
	val []byte
	// released: release ran; the lease writes no slot again (renewLocked).
	released bool
}

// slotValue is what the slots of a lease hold: the executor, the call id and a token of the
// lease's own (another delivery of the call takes slots of its own).
func (l *limiter) slotValue(callID string) []byte {
	return []byte(l.owner + " " + callID + " " + strconv.FormatUint(rand.Uint64(), 36))
}

// increment is a call's acknowledged +1 on a rate counter.
type increment struct {
	subject string
	seq     uint64 // the stream sequence it was stored at
}

type slotLease struct {
	key string
	rev uint64 // 0: unknown (a Create that may have been stored: see renewLocked)
	// expires is when its TTL ends at the earliest (counted from before it was written).
	expires time.Time
}

// acquire checks every rate and takes every concurrency slot of lim. It returns a refusal
// (rate_limited with RetryAfterMs) or the lease to release when the call ends. A call that is
// refused or fails here counts against no rate: what it added to the counters is given back
// (a call refused by a concurrency cap and retried must not use up the rate budget).
//
// The counters and the slots are in memory storage, which a NATS server does not keep when it
// restarts: a call that finds them gone declares them again (empty: every window starts over,
// every slot is free) and checks once more.
func (l *limiter) acquire(ctx context.Context, callID string, lim []scopeLimit) (*lease, *subjects.Error, error) {
	return l.acquireFor(ctx, callID, 0, lim)
}

// acquireFor is acquire for a call that may be dispatched with a timeout of up to hold: its
// slots are written with a TTL that covers it (hold plus the lease, see holdUntil), so that the
// dispatch needs no write of its own to hold them (a worker that dies before dispatching keeps
// them as long: a cap undercounted for a while, never exceeded).
func (l *limiter) acquireFor(ctx context.Context, callID string, hold time.Duration, lim []scopeLimit) (*lease, *subjects.Error, error) {
	if len(lim) == 0 {
		return &lease{l: l}, nil, nil
	}
	ls, refusal, err := l.take(ctx, callID, hold, lim)
	if err != nil && stateLost(err) {
		if err = l.restoreState(ctx, err); err == nil {
			ls, refusal, err = l.take(ctx, callID, hold, lim)
		}
	}
	return ls, refusal, err
}

// restoreState declares the limiter's state again after err said it is gone (once a second at
// most over every worker): nil when it is there now, else err with why declaring it failed
// (the last try's, within the second after it).
//
// A call that finds a try running waits for it (after a NATS restart it takes milliseconds, and
// the call then goes on), unless the last try failed: then it is refused at once with that
// failure. A try after a failure may take all of restoreWait again (a request JetStream drops,
// as when the executor's NATS user may not declare the state), and every call with limits
// waited for it, a worker each, for 5 s of every 6 while the failure lasted: enough of them held
// every worker, and the calls with no limits waited too.
func (l *limiter) restoreState(ctx context.Context, err error) error {
	if l.restore == nil {
		return err
	}
	if !l.restoreMu.TryLock() {
		if last := l.restoreErr.Load(); last != nil {
			return restoreFailed(err, *last)
		}
		if l.restoreWaited != nil {
			l.restoreWaited()
		}
		l.restoreMu.Lock()
	}
	defer l.restoreMu.Unlock()
	if l.restoredAt.IsZero() || l.now().Sub(l.restoredAt) >= time.Second {
		// Bounded as a whole, the retake too: it holds every capped call (restoring), and one
		// read and one write per slot of each live lease, each waited for up to the client's
		// timeout (5 s: a worker's context has no deadline), held them for minutes when NATS
		// hung just after the state was declared again.
		bound := l.restoreBound
		if bound <= 0 {
			bound = restoreWait
		}
		rctx, cancel := context.WithTimeout(ctx, bound)
		l.restoring.Lock()
		rerr := l.restore(rctx)
		if rerr == nil {
			l.retakeLive(rctx)
			l.restoreErr.Store(nil)
		} else {
			l.restoreErr.Store(&rerr)
		}
		l.restoring.Unlock()
		cancel()
		l.restoredAt = l.now()
	} // else another call just tried
	if last := l.restoreErr.Load(); last != nil {
		return restoreFailed(err, *last)
	}
	return nil
}

// restoreFailed is the error of a call that found the limits state gone (err) and could not
// have it declared again (why).
func restoreFailed(err, why error) error {
	return fmt.Errorf("%w; declaring the limits state again failed: %w", err, why)
}

// retakeLive has every live lease take its slots again in the slots bucket just declared again
// (see renewLocked): emptied, it let as many new calls run as the caps allow beside the calls
// in flight, the cap exceeded until they ended. (Other executors' calls in flight take theirs
// at their next renewal.) Within ctx (restoreState's bound), also while it waits for a lease a
// renewal or a release holds, which may hang as long as NATS does whatever ctx: a lease it does
// not get to within it takes its slots again at its next renewal.
func (l *limiter) retakeLive(ctx context.Context) {
	l.liveMu.Lock()
	live := make([]*lease, 0, len(l.live))
	for ls := range l.live {
		live = append(live, ls)
	}
	l.liveMu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ls := range live {
			if ctx.Err() != nil {
				return
			}
			ls.renew(ctx)
		}
	}()
	select {
	case <-done:
	case <-ctx.Done(): // (the renewals left see it done: they write nothing)
	}
}

// leaseTTL is lease, as last set.
func (l *limiter) leaseTTL() time.Duration {
	l.leaseMu.RLock()
	defer l.leaseMu.RUnlock()
	return l.lease
}

// setLease sets lease: the TTL slots are written with from now on (0: none, see lease).
func (l *limiter) setLease(d time.Duration) {
	l.leaseMu.Lock()
	l.lease = d
	l.leaseMu.Unlock()
}

// acquireRates is the first half of acquire: it counts the call against every rate of lim and
// returns its increments (given back with giveBack if the call does not run after all), or a
// refusal or error, having given back every count itself. A call that needs approval takes its
// rates before it is asked about (see admit), its slots once approved (acquireSlots).
func (l *limiter) acquireRates(ctx context.Context, lim []scopeLimit) ([]increment, *subjects.Error, error) {
	counted, refusal, err := l.checkRates(ctx, lim)
	if err != nil && stateLost(err) {
		if err = l.restoreState(ctx, err); err == nil {
			counted, refusal, err = l.checkRates(ctx, lim)
		}
	}
	return counted, refusal, err
}

// acquireSlots is the second half of acquire, for a call whose rates counted already: it takes
// every concurrency slot of lim and returns the lease, which holds counted (for refund). A
// refusal or error holds no slot and gives nothing back: counted stays the caller's.
// hold is acquireFor's.
func (l *limiter) acquireSlots(ctx context.Context, callID string, hold time.Duration, lim []scopeLimit, counted []increment) (*lease, *subjects.Error, error) {
	ls, refusal, err := l.takeSlots(ctx, callID, hold, lim, counted)
	if err != nil && stateLost(err) {
		if err = l.restoreState(ctx, err); err == nil {
			ls, refusal, err = l.takeSlots(ctx, callID, hold, lim, counted)
		}
	}
	return ls, refusal, err
}

// take is acquire without the restore.
func (l *limiter) take(ctx context.Context, callID string, hold time.Duration, lim []scopeLimit) (*lease, *subjects.Error, error) {
	counted, refusal, err := l.checkRates(ctx, lim)
	if refusal != nil || err != nil {
		return nil, refusal, err // checkRates gave its counts back
	}
	ls, refusal, err := l.takeSlots(ctx, callID, hold, lim, counted)
	if ls == nil {
		l.giveBack(counted)
	}
	return ls, refusal, err
}

// takeSlots takes every concurrency slot of lim for a call that counted counted against the
// rates: the lease, holding counted, or a refusal or error with no slot held (counted is not
// given back).
func (l *limiter) takeSlots(ctx context.Context, callID string, hold time.Duration, lim []scopeLimit, counted []increment) (*lease, *subjects.Error, error) {
	ls := &lease{l: l, counted: counted, val: l.slotValue(callID)}
	if hold > 0 {
		ls.hold = time.Now().Add(hold) // (renewals before the dispatch keep it)
	}
	if !slices.ContainsFunc(lim, func(s scopeLimit) bool { return s.rate.Concurrency > 0 }) {
		// No slot to take: not held up by a restore of the slots bucket (which may take
		// restoreWait), as a call with rates only or no limits (an approved one) was.
		return ls, nil, nil
	}
	if !l.restoring.TryRLock() {
		// A restore runs: after a failure, refused at once, as restoreState refuses.
		if last := l.restoreErr.Load(); last != nil {
			return nil, nil, restoreFailed(fmt.Errorf("%w: the slots bucket is being declared again", ErrLimits), *last)
		}
		if l.restoreWaited != nil {
			l.restoreWaited()
		}
		l.restoring.RLock()
	}
	defer l.restoring.RUnlock()
	for _, s := range lim {
		if s.rate.Concurrency <= 0 {
			continue
		}
		sl, ok, err := l.takeSlot(ctx, s, ls.val, hold)
		if sl.key != "" {
			// (also a slot whose Create failed but may have been stored: released with the
			// others, if it holds the lease's value)
			ls.slots = append(ls.slots, sl)
		}
		if err != nil || !ok {
			ls.release(context.WithoutCancel(ctx))
			if err != nil {
				return nil, nil, err
			}
			return nil, &subjects.Error{Code: subjects.CodeRateLimited, RetryAfterMs: concurrencyRetryAfter.Milliseconds(),
				Message: fmt.Sprintf("%s %s has %d calls in flight (its concurrency cap)", s.scope, s.key, s.rate.Concurrency)}, nil
		}
	}
	if len(ls.slots) > 0 {
		// The slots bucket is there: a restore's failure no longer says anything of it (the
		// state came back otherwise: another executor declared it), and must not refuse at
		// once the calls that find a later try running (see restoreState), which may be one
		// that succeeds in milliseconds. (No try stores one meanwhile: restoring is held.)
		if l.restoreErr.Load() != nil {
			l.restoreErr.Store(nil)
		}
		l.liveMu.Lock()
		if l.live == nil {
			l.live = map[*lease]struct{}{}
		}
		l.live[ls] = struct{}{}
		l.liveMu.Unlock()
	}
	return ls, nil, nil
}

// counterSubject is the counter of window idx of a scope.
func counterSubject(s scopeLimit, idx int64) string {
	return subjects.LimitWindow(s.scope, s.key, idx)
}

// rateCount is one increment of a rate counter by a call, awaiting its acknowledgement.
type rateCount struct {
	s    scopeLimit
	n    int64
	w    time.Duration
	idx  int64
	frac float64
	fut  jetstream.PubAckFuture
}

// checkRates adds 1 to the current window's counter of every rate of lim and checks the
// estimates. It returns the increments it made (the caller gives them back if the call does not
// run after all), or a refusal or error, in which case it gave back every count itself.
func (l *limiter) checkRates(ctx context.Context, lim []scopeLimit) ([]increment, *subjects.Error, error) {
	// (a restore's failure stored meanwhile, by a later try, is not cleared: see below)
	failed := l.restoreErr.Load()
	var now time.Time // read once a rate is there: a call with none asks no clock
	var ps []rateCount
	for _, s := range lim {
		n, w := s.rate.window()
		if n == 0 {
			continue
		}
		if now.IsZero() {
			now = l.windowNow(ctx)
		}
		idx := now.UnixNano() / int64(w)
		frac := float64(now.UnixNano()-idx*int64(w)) / float64(w)
		msg := &nats.Msg{Subject: counterSubject(s, idx), Header: nats.Header{"Nats-Incr": []string{"1"}}}
		fut, err := l.js.PublishMsgAsync(msg)
		if err != nil {
			l.giveBackWhenAcked(ps)
			return nil, nil, fmt.Errorf("%w: %w", ErrLimits, err)
		}
		ps = append(ps, rateCount{s: s, n: n, w: w, idx: idx, frac: frac, fut: fut})
	}
	var counted []increment
	var late []rateCount // not acknowledged before ctx ended: may have counted
	var worst time.Duration
	var why string
	var firstErr error
	for _, p := range ps {
		var ack *jetstream.PubAck
		select {
		case ack = <-p.fut.Ok():
		case err := <-p.fut.Err():
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: %w", ErrLimits, err)
			}
			continue
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: %w", ErrLimits, ctx.Err())
			}
			late = append(late, p)
			continue
		}
		counted = append(counted, increment{p.fut.Msg().Subject, ack.Sequence})
		cur, err := strconv.ParseInt(ack.Value, 10, 64)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: counter value %q", ErrLimits, ack.Value)
			}
			continue
		}
		elapsed := time.Duration(p.frac * float64(p.w)) // into the window
		prev, settled, err := l.previous(ctx, p.s, p.idx, elapsed, false)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		// A counter holds at least the calls it counted (this one included), except for the
		// moment a give-back that landed on a counter emptied by a NATS restart takes to be
		// undone (see giveBack): never count fewer than this call.
		cur, prev = max(cur, 1), max(prev, 0)
		wait := rateWait(p.n, p.w, p.frac, prev, cur)
		if wait > 0 && !settled && prev > 0 {
			// Refused by a count read as the window began: read it again (see previous).
			if again, _, err := l.previous(ctx, p.s, p.idx, elapsed, true); err == nil {
				prev = max(again, 0)
				wait = rateWait(p.n, p.w, p.frac, prev, cur)
			}
		}
		if wait > 0 {
			if wait > worst {
				worst = wait
				why = fmt.Sprintf("%s %s is limited to %d calls per %s", p.s.scope, p.s.key, p.n, p.w)
			}
		}
	}
	if failed != nil && l.uncapped && len(counted) > 0 {
		// The counters answered: the state is back (declared by another executor), and a
		// restore's failure must not refuse at once the calls that find a later try running
		// (see restoreState). With a cap, a call that took its slots clears it (takeSlots): the
		// counters answering says nothing of the slots bucket (declaring it may be what fails).
		l.restoreErr.CompareAndSwap(failed, nil)
	}
	if firstErr != nil || worst > 0 {
		l.giveBack(counted)
		l.giveBackWhenAcked(late)
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if worst > 0 {
		return nil, &subjects.Error{Code: subjects.CodeRateLimited, Message: why,
			RetryAfterMs: worst.Milliseconds() + 1}, nil // the first whole millisecond past it
	}
	return counted, nil, nil
}

// rateWait says how long a call that made the current window's counter cur must wait (0: it
// may run now): the sliding estimate ⌊prev×(1−frac)⌋ + cur must not exceed n. The previous
// window's calls still inside the sliding window are estimated as if spread evenly, and only
// whole calls count: with prev×(1−frac) unrounded, a previous window of n calls kept a fraction
// of a call against the limit until the very end of the next window, so at most n−1 calls fit
// in it and a rate averaged (n−1)/n of PerSecond ({PerSecond: 1}: one call every 2 s). The wait
// is until just after the moment the estimate allows the call, assuming no other call comes
// meanwhile and that this one, and every other call refused, gives its count back.
func rateWait(n int64, w time.Duration, frac float64, prev, cur int64) time.Duration {
	if math.Floor(float64(prev)*(1-frac))+float64(cur) <= float64(n) {
		return 0
	}
	others := cur - 1 // calls counted in this window besides this one
	// Of them, at most n − ⌊prev×(1−frac)⌋ ran (each ran on an estimate within n, when the
	// previous window weighed at least what it weighs now); the rest are calls being refused at
	// the same moment, whose give-backs land within milliseconds. Counted as calls that ran, they
	// put the retry later within the window by a call's share of it each (110 s instead of 10 s
	// for 4 per 200 s with two others refused at once), as they did across it (below).
	ran := max(min(others, n-int64(math.Floor(float64(prev)*(1-frac)))), 0)
	var at float64 // position of the allowed moment, in windows from this window's start
	if ran+1 <= n && prev > 0 {
		// Within this window, once prev×(1−f) < n−ran.
		at = 1 - float64(n-ran)/float64(prev)
	} else {
		// In the next window, once this window's count, the previous one then, weighs less
		// than n: ⌊ran×(1−f)⌋ + 1 ≤ n with ran ≤ n from its very start. Not others: a window
		// runs at most n calls (each ran on a total of at most n), and the counts past n are
		// calls being refused at the same moment, whose give-backs land within milliseconds —
		// counting them as calls that ran put the retry up to one more window late, and more
		// the more callers contend.
		at = 1
	}
	// Strictly past that moment (the estimate equals the limit there): a microsecond more, so
	// that a wait computed a little short in floating point does not bring the retry back
	// exactly onto it.
	wait := time.Duration((at-frac)*float64(w)) + time.Microsecond
	return max(wait, time.Millisecond)
}

// previous returns the final count of the window before idx, elapsed into window idx, and
// whether it is settled. It is cached once read (a closed window only changes by late
// give-backs), and read again when fresh. A count read within prevSettle (a quarter of a
// shorter window) of the window's start may still hold calls being refused at the previous
// window's end (their give-backs not in yet): kept for the whole window, they weighed as calls
// that ran, and refused calls (with a retryAfterMs to match) until late into it. The caller
// reads such a count again before it refuses a call on it.
func (l *limiter) previous(ctx context.Context, s scopeLimit, idx int64, elapsed time.Duration, fresh bool) (int64, bool, error) {
	key := s.scope + "\x00" + s.key
	l.mu.Lock()
	p, ok := l.prev[key]
	l.mu.Unlock()
	if ok && p.idx == idx-1 && !fresh {
		return p.val, p.settled, nil
	}
	var val int64
	m, err := l.stream.GetLastMsgForSubject(ctx, counterSubject(s, idx-1))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return 0, false, fmt.Errorf("%w: %w", ErrLimits, err)
	default:
		var cv struct {
			Val string `json:"val"`
		}
		if json.Unmarshal(m.Data, &cv) == nil {
			val, _ = strconv.ParseInt(cv.Val, 10, 64)
		}
	}
	l.mu.Lock()
	if len(l.prev) > 100_000 {
		clear(l.prev)
	}
	_, w := s.rate.window()
	settled := elapsed >= min(prevSettle, w/4)
	l.prev[key] = prevWindow{idx: idx - 1, val: val, settled: settled}
	l.mu.Unlock()
	return val, settled, nil
}

// giveBack subtracts the counts of a refused call: -1 on each counter it added 1 to
// (acknowledged increments only, each given back once). The counters live in JetStream: every
// worker sees the give-back.
//
// A give-back must not land on a counter that does not hold its increment: the counters are in
// memory storage, a NATS server restart empties them (the first call that finds them gone
// declares them again), and a call counted before the restart may give back after it — refused
// at its claim, or its -1 waiting in the client's reconnect buffer. The counter would hold fewer
// than the calls it counted (below 0 if none), and each call missing lets one more through in
// that window. So each give-back is checked once acknowledged and undone (+1) when it was stored
// at a sequence before its increment's (the stream is a new one) or left the counter below 0
// (it held fewer than it counted). A -1 that takes a counter below 0 is always followed by its
// +1, so no counter stays below 0, whatever the order of give-backs. (A stale -1 that finds
// neither — the new stream already past the old one's sequence, the counter above 0 — still
// lets one call more through in its window: a restart already started every window over.)
func (l *limiter) giveBack(incs []increment) {
	var sent []increment
	var futs []jetstream.PubAckFuture
	for _, in := range incs {
		msg := &nats.Msg{Subject: in.subject, Header: nats.Header{"Nats-Incr": []string{"-1"}}}
		if fut, err := l.js.PublishMsgAsync(msg); err == nil {
			sent, futs = append(sent, in), append(futs, fut)
		}
	}
	if len(futs) == 0 {
		return
	}
	go func() {
		timeout := time.NewTimer(auditAckWait)
		defer timeout.Stop()
		for i, fut := range futs {
			select {
			case ack := <-fut.Ok():
				if v, err := strconv.ParseInt(ack.Value, 10, 64); ack.Sequence > sent[i].seq && (err != nil || v >= 0) {
					continue
				}
				msg := &nats.Msg{Subject: sent[i].subject, Header: nats.Header{"Nats-Incr": []string{"1"}}}
				l.js.PublishMsgAsync(msg)
			case <-fut.Err():
			case <-timeout.C:
				return
			}
		}
	}()
}

// giveBackWhenAcked gives back, in the background, the increments whose acknowledgement was
// not awaited (the call's context ended first) once they turn out to have counted. An increment
// whose publish failed or timed out is not given back: it may or may not have counted, and a
// spurious give-back could take the counter below its calls.
func (l *limiter) giveBackWhenAcked(ps []rateCount) {
	if len(ps) == 0 {
		return
	}
	go func() {
		timeout := time.NewTimer(auditAckWait)
		defer timeout.Stop()
		for _, p := range ps {
			select {
			case ack := <-p.fut.Ok():
				l.giveBack([]increment{{p.fut.Msg().Subject, ack.Sequence}})
			case <-p.fut.Err():
			case <-timeout.C:
				return
			}
		}
	}()
}

// refund gives back the rate counts of a call that took its limits but does not run after all;
// only the first refund of a lease gives anything back.
func (ls *lease) refund() {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	counted := ls.counted
	ls.counted = nil
	ls.mu.Unlock()
	ls.l.giveBack(counted)
}

// kvToken makes any string a valid KV key token, injectively (EncodeToken with '=' for '~').
func kvToken(s string) string { return strings.ReplaceAll(subjects.EncodeToken(s), "~", "=") }

// takeSlot takes a free slot of s's concurrency cap, looking at its n slots from a random one
// (so that concurrent callers spread over them) until one is free. Each is read first and only a
// free one is written (Create: atomic, so two calls never hold one slot and the cap is never
// exceeded). Trying every slot with Create cost n writes and n reads for each refusal at a full
// cap — under overload, when NATS is busiest, and by every refused caller again at each retry; a
// refusal now costs n reads (direct gets: nothing is stored) and no write, and a call is refused
// only when every slot it read was held.
//
// A Create that fails otherwise than by the slot being taken (a timeout: NATS busy, a leader
// change, the connection dropped under it) may have been stored all the same, its
// acknowledgement lost: the slot is returned with the error, at revision 0 (unknown), for the
// caller to release. Left, it was held by no call until its TTL ran out (the call's timeout
// plus the lease), the cap one call lower meanwhile. Its value is the lease's own (slotValue):
// the release deletes it only if it holds that value (see ownRevision), never another call's.
func (l *limiter) takeSlot(ctx context.Context, s scopeLimit, val []byte, hold time.Duration) (slotLease, bool, error) {
	n := s.rate.Concurrency
	start := rand.IntN(n)
	prefix := kvToken(s.scope) + "." + kvToken(s.key) + "."
	var opts []jetstream.KVCreateOpt
	lease := l.leaseTTL()
	ttl := slotTTL(lease)
	if lease > 0 {
		if hold > 0 {
			// (a second more: what passes before the dispatch, the claim's write, is then
			// covered too, and holdUntil writes nothing)
			ttl = slotTTL(hold + lease + time.Second)
		}
		opts = append(opts, jetstream.KeyTTL(ttl))
	}
	for i := range n {
		key := prefix + strconv.Itoa((start+i)%n)
		_, err := l.slots.Get(ctx, key)
		if err == nil {
			continue // held
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) { // (also a slot released: a delete marker)
			return slotLease{}, false, fmt.Errorf("%w: slot %s: %w", ErrLimits, key, err)
		}
		before := time.Now()
		rev, err := l.slots.Create(ctx, key, val, opts...)
		if err == nil {
			return slotLease{key: key, rev: rev, expires: before.Add(ttl)}, true, nil
		}
		if !slotTaken(err) { // taken since it was read: look further
			return slotLease{key: key, expires: before.Add(ttl)}, false, fmt.Errorf("%w: slot %s: %w", ErrLimits, key, err)
		}
	}
	return slotLease{}, false, nil
}

// slotTaken reports whether a Create of a slot failed because another call wrote it first: the
// key exists (10071, ErrKeyExists), or, on a replicated bucket, 10164 ("wrong last sequence"),
// which nats.go's Create passes on unmapped when the slot was released (a delete marker: it
// writes over the marker's revision) and another call took it at the same moment.
func slotTaken(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// slotTTL is a per-key TTL of d: JetStream takes whole seconds (it drops the rest), 1 s at least.
func slotTTL(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// renew extends the slots' leases (while a long call runs).
func (ls *lease) renew(ctx context.Context) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.renewLocked(ctx)
}

func (ls *lease) renewLocked(ctx context.Context) {
	if ls.released {
		return
	}
	l := ls.l
	lease := l.leaseTTL()
	for i, s := range ls.slots {
		// The revision the slot is this lease's at: read (see ownRevision).
		own, gone := ls.ownRevision(ctx, s)
		before := time.Now()
		ttl := slotTTL(max(lease, ls.hold.Sub(before)+lease))
		if gone {
			// Free: freed by its TTL (renewals late), by a bucket declared again, empty, or
			// gone with its bucket (taken in the one declared again, if it is by then).
			// The call still runs: it takes its slot again if it is free, as it counts against
			// the cap (else the cap is exceeded while it runs: nothing to be done).
			var opts []jetstream.KVCreateOpt
			if lease > 0 {
				opts = append(opts, jetstream.KeyTTL(ttl))
			}
			rev, err := l.slots.Create(ctx, s.key, ls.val, opts...)
			if err == nil {
				ls.slots[i].rev, ls.slots[i].expires = rev, before.Add(ttl)
			}
			if err != nil && !slotTaken(err) {
				// Maybe stored all the same (a timeout, the restore's bound cutting a retake
				// short), at a revision the lease does not know: in a bucket declared again,
				// one before the revision it knows, which ownRevision would take over the
				// slot's (every renewal and the release refused until the TTL). The revision
				// is unknown (0): the slot's value says whether it is the lease's.
				ls.slots[i].rev = 0
			}
			if err == nil || !slotTaken(err) {
				continue
			}
			// Taken since it was read, or the read was behind: read again (the slot may be
			// another call's now at the revision the lease knows, in a bucket declared again).
			if own, gone = ls.ownRevision(ctx, s); gone {
				continue
			}
			before = time.Now()
			ttl = slotTTL(max(lease, ls.hold.Sub(before)+lease))
		}
		if own == 0 {
			continue // another call's, or not read
		}
		if lease <= 0 {
			if rev, err := l.slots.Update(ctx, s.key, ls.val, own); err == nil {
				ls.slots[i].rev = rev
			}
			continue
		}
		// Update with the slot's TTL (nats.go's Update takes none): the lease, or what is left
		// of the dispatched call's deadline plus the lease.
		msg := &nats.Msg{Subject: "$KV." + subjects.SlotsBucket + "." + s.key, Data: ls.val}
		ack, err := l.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(own), jetstream.WithMsgTTL(ttl))
		if err == nil {
			ls.slots[i].rev, ls.slots[i].expires = ack.Sequence, before.Add(ttl)
		}
	}
}

// ownRevision reads slot s and returns the revision to renew or release it at as this lease's
// (0: it is another call's, gone with its bucket, or not read), and whether it is free. No
// other lease writes this one's value (slotValue), so the value says whether the slot is still
// the lease's, not the revision the lease knows:
//   - at a later revision after a renewal JetStream stored whose acknowledgement was lost (a
//     timeout, a leader change): written at the lease's, the renewal and the release were
//     refused, and the slot stayed taken until its TTL ran out, up to the call's timeout plus
//     the lease after the call had ended;
//   - not the lease's at the revision it knows when the slots bucket was declared again (lost
//     with a NATS restart, or removed), whose revisions start over: that revision may be
//     another call's slot then, which the renewal wrote over (the other's release refused) and
//     the release freed while the other call ran, one call more than the cap let through.
//
// Otherwise (free, or another call's at another revision) it is the lease's revision: a write
// at it is refused unless the slot's last write is still the lease's (the read was answered by a
// replica behind the leader, say). A slot not read (a timeout: NATS busy, or reconnecting after
// a restart) is not written (0): the bucket may have been declared again since the lease learned
// its revision (by another executor: nothing here says so), and a write at it is then the one
// above. The next renewal reads it again (renewals come a third of the lease apart), and its TTL
// frees a slot whose release could not read it: the cap undercounted for a while, not exceeded.
func (ls *lease) ownRevision(ctx context.Context, s slotLease) (own uint64, free bool) {
	e, err := ls.l.slots.Get(ctx, s.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound): // (also a slot released: a delete marker)
		return s.rev, true
	case err != nil && stateLost(err):
		// The bucket is gone, the slot with it: nothing to write at the lease's revision. A
		// write at it now (nats.go retries one no stream answers for half a second; a NATS
		// restart sends what it buffered) could reach the bucket declared again, where that
		// revision may be another call's slot.
		return 0, true
	case err != nil:
		return 0, false
	case bytes.Equal(e.Value(), ls.val):
		return max(e.Revision(), s.rev), false
	case e.Revision() == s.rev:
		return 0, false
	default:
		return s.rev, false
	}
}

// holdUntil holds the slots until deadline, the dispatched call's, plus the lease: the
// connector runs the call until deadline (the timeoutMs it is sent is what is left of it) on
// its own, also when this worker dies and its lease is no longer renewed; a slot freed by the
// lease alone would let another call run beside it. Written now only when a slot's TTL does
// not cover it already; the heartbeats' renewals keep it.
func (ls *lease) holdUntil(ctx context.Context, deadline time.Time) {
	if ls == nil {
		return
	}
	lease := ls.l.leaseTTL()
	if lease <= 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.hold = deadline
	for _, s := range ls.slots {
		if s.expires.Before(deadline.Add(lease)) {
			ls.renewLocked(ctx)
			return
		}
	}
}

// release frees the slots.
func (ls *lease) release(ctx context.Context) {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, s := range ls.slots {
		// A slot whose lease ran out may belong to another call now, also at the revision the
		// lease knows (a bucket declared again): deleted only at the lease's own revision (see
		// ownRevision).
		if own, _ := ls.ownRevision(ctx, s); own != 0 {
			ls.l.slots.Delete(ctx, s.key, jetstream.LastRevision(own))
		}
	}
	if len(ls.slots) > 0 {
		ls.l.liveMu.Lock()
		delete(ls.l.live, ls)
		ls.l.liveMu.Unlock()
	}
	ls.slots, ls.released = nil, true
}
