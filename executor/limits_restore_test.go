package executor

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// startSlotsNoUpdateServer starts a JetStream server with two users: admin, who may do
// anything, and exec, who may do anything but update the slots bucket's stream (an operator
// locking the bucket's config down); it returns their JetStream APIs, with the streams of
// subjects.Streams declared.
func startSlotsNoUpdateServer(t *testing.T) (admin, exec jetstream.JetStream) {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "admin", Password: "admin"}, {Username: "exec", Password: "exec",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"},
				Deny: []string{"$JS.API.STREAM.UPDATE.KV_" + subjects.SlotsBucket}}}}}}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(waitLimit) {
		t.Fatal("server not ready")
	}
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, user), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin, exec = connect("admin"), connect("exec")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := subjects.EnsureStreams(ctx, admin, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return admin, exec
}

// runLimitsExecutor runs an executor without workers nor front end on nc (its limiter alone is
// used), logging to logs, until the test ends.
func runLimitsExecutor(t *testing.T, nc *nats.Conn, cfg Config, logs *lockedBuffer) *Executor {
	t.Helper()
	cfg.NoWorkers, cfg.FrontEnd = true, new(bool)
	cfg.Log = zerolog.New(logs).Level(zerolog.InfoLevel)
	ex, err := New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Errorf("executor did not stop")
		}
	})
	waitFor(t, "executor ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("executor Run: %v", err)
		default:
		}
		return ex.Ready()
	})
	return ex
}

// recreateSlotsBucket deletes the slots bucket and declares it again as an older mcpstream did
// (no per-key TTLs, its TTL the lease), as after a NATS restart an older executor may.
func recreateSlotsBucket(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := js.DeleteKeyValue(ctx, subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
}

// TestSlotsRestoredWithoutTTLs: the slots bucket was declared again without per-key TTLs while
// the executor ran (lost, then declared by an older mcpstream), and the executor may not give
// them to it. Declared again, the state was taken as restored whatever ensureState found: the
// limiter went on writing every slot with a TTL, which JetStream refuses on such a bucket, and
// every call under a concurrency cap was refused unavailable ("limits cannot be checked") until
// the executor restarted, with no warning. The restore makes the decisions of the start: slots
// without TTLs (the bucket's TTL the lease), warned once; the cap holds.
func TestSlotsRestoredWithoutTTLs(t *testing.T) {
	admin, exec := startSlotsNoUpdateServer(t)
	logs := &lockedBuffer{}
	cfg := Config{Name: "restore"}
	cfg.hooks.restoreWait = time.Second // (the denied update of the bucket is dropped: waited for)
	ex := runLimitsExecutor(t, exec.Conn(), cfg, logs)
	if strings.Contains(logs.String(), "no per-key TTLs") {
		t.Fatalf("warned of no per-key TTLs at start, on a bucket it declared itself: %s", logs)
	}
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	acquire := func(id string) (*lease, *subjects.Error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		return ex.lim.acquireFor(ctx, id, time.Minute, lim)
	}
	ls, refusal, err := acquire("before")
	if err != nil || refusal != nil {
		t.Fatalf("before: %v %+v", err, refusal)
	}
	ls.release(context.Background())

	recreateSlotsBucket(t, admin)
	for i := range 3 { // (the warning once, whatever the calls)
		ls, refusal, err = acquire("after")
		if err != nil || refusal != nil {
			t.Fatalf("call %d under a cap after the slots bucket was declared again without per-key TTLs: %v %+v", i, err, refusal)
		}
		_, refusal, err = acquire("second")
		if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
			t.Fatalf("a second call while the first holds the cap of 1: %v %+v, want rate_limited", err, refusal)
		}
		ls.release(context.Background())
	}
	if n := strings.Count(logs.String(), "takes no per-key TTLs"); n != 1 {
		t.Errorf("warned %d times that the slots bucket takes no per-key TTLs, want once: %s", n, logs)
	}
	if !strings.Contains(logs.String(), "allow_msg_ttl") {
		t.Errorf("the warning does not say why: %s", logs)
	}

	// Lost again, and declared by this executor: per-key TTLs again.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := admin.DeleteKeyValue(ctx, subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // (past the once-a-second bound of restores)
	ls, refusal, err = acquire("again")
	if err != nil || refusal != nil {
		t.Fatalf("a call once the slots bucket is declared again with per-key TTLs: %v %+v", err, refusal)
	}
	if _, refusal, err = acquire("second"); err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
		t.Fatalf("a second call while the first holds the cap of 1: %v %+v, want rate_limited", err, refusal)
	}
	ls.release(ctx)
	if got := ex.lim.leaseTTL(); got != DefaultSlotLease {
		t.Errorf("slots written with a TTL of %s once the bucket takes per-key TTLs again, want %s", got, DefaultSlotLease)
	}
	if !strings.Contains(logs.String(), "takes per-key TTLs again") {
		t.Errorf("not told the slots bucket takes per-key TTLs again: %s", logs)
	}
}

// restoringLimiter is newTestLimiter (cap slots with per-key TTLs) that declares the state again
// when it finds it gone, as an executor does.
func restoringLimiter(t *testing.T, env *natstest.Env, owner string) *limiter {
	t.Helper()
	l := newTestLimiter(t, env, Config{})
	l.owner = owner
	l.restore = func(ctx context.Context) error {
		_, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false)
		return err
	}
	return l
}

// loseSlots removes the slots bucket, as a NATS restart empties it (memory storage).
func loseSlots(t *testing.T, env *natstest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := env.JS.DeleteKeyValue(ctx, subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	}
}

func mustAcquire(t *testing.T, l *limiter, id string, lim []scopeLimit) *lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ls, refusal, err := l.acquireFor(ctx, id, time.Minute, lim)
	if err != nil || refusal != nil {
		t.Fatalf("%s: %v %+v", id, err, refusal)
	}
	return ls
}

func wantCapFull(t *testing.T, l *limiter, id string, lim []scopeLimit, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ls, refusal, err := l.acquireFor(ctx, id, time.Minute, lim)
	if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
		ls.release(ctx)
		t.Fatalf("%s: got %v %+v, want rate_limited: %s", id, err, refusal, why)
	}
}

// TestStaleLeaseOfRedeclaredSlots: a call in flight on another executor held a slot when the
// slots bucket was lost and declared again; the new bucket's revisions start over, and a call
// of this executor took the same slot at the revision the stale lease knew. The stale lease's
// renewal (an update expecting that revision) wrote over the new call's slot, and its release
// (a delete of that revision) freed it while the new call ran: a third call ran beside it, over
// a cap of 1. A lease renews and releases only a slot that holds its own value.
func TestStaleLeaseOfRedeclaredSlots(t *testing.T) {
	env := natstest.Start(t)
	other, mine := restoringLimiter(t, env, "other"), restoringLimiter(t, env, "mine")
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	stale := mustAcquire(t, other, "stale", lim)
	rev := stale.slots[0].rev

	loseSlots(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false) // (another executor's restore)
	if err != nil {
		t.Fatal(err)
	}
	// The new bucket's next write at the stale lease's revision.
	for i := 0; ; i++ {
		s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
		if err != nil {
			t.Fatal(err)
		}
		if last := s.CachedInfo().State.LastSeq; last+1 == rev {
			break
		} else if last+1 > rev || i > 1000 {
			t.Fatalf("the new bucket is at %d, past the stale revision %d", last, rev)
		}
		if _, err := st.slots.Put(ctx, "pad", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	held := mustAcquire(t, mine, "held", lim)
	if held.slots[0].key != stale.slots[0].key || held.slots[0].rev != rev {
		t.Fatalf("precondition: the new call's slot %s@%d, want %s@%d", held.slots[0].key, held.slots[0].rev, stale.slots[0].key, rev)
	}
	stale.renew(ctx)
	stale.release(ctx)
	wantCapFull(t, mine, "third", lim, "a stale lease of a bucket declared again freed the slot of the call holding the cap of 1")
	held.release(ctx)
	mustAcquire(t, mine, "after", lim).release(ctx) // (no slot leaked)
}

// TestInFlightSlotsRetakenAfterRestore: the slots bucket lost (a NATS restart) and declared
// again empty let new calls take every slot while the calls in flight ran on: a cap of 1 let
// two calls run. The restoring executor's calls in flight take their slots again as it
// declares the bucket (before any new call takes one), another executor's at their next
// renewal.
func TestInFlightSlotsRetakenAfterRestore(t *testing.T) {
	env := natstest.Start(t)
	l, other := restoringLimiter(t, env, "l"), restoringLimiter(t, env, "other")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	a := []scopeLimit{{subjects.LimitScopeServer, "a", Rate{Concurrency: 1}}}
	inFlight := mustAcquire(t, l, "inflight", a)
	loseSlots(t, env)
	wantCapFull(t, l, "new", a, "the call in flight of the restoring executor holds the cap of 1")
	inFlight.release(ctx)
	mustAcquire(t, l, "after", a).release(ctx)

	b := []scopeLimit{{subjects.LimitScopeServer, "b", Rate{Concurrency: 1}}}
	elsewhere := mustAcquire(t, other, "elsewhere", b)
	loseSlots(t, env)
	if _, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false); err != nil { // (l's restore)
		t.Fatal(err)
	}
	elsewhere.renew(ctx) // (its executor's heartbeat)
	wantCapFull(t, l, "new", b, "another executor's call in flight holds the cap of 1 once renewed")
	elsewhere.release(ctx)
	mustAcquire(t, l, "after", b).release(ctx)
}

// TestCapHoldsAcrossRestore: calls in flight hold a cap of 2 when the slots bucket is lost;
// concurrent callers then find it gone, one declares it again, and calls come and go while the
// calls in flight end. At no moment do more calls hold the cap than it allows: the calls in
// flight until they release their slots, and the new ones from when they have taken theirs
// until they release them. A stale lease of another executor renews and releases meanwhile
// (it may only hold a slot more, never free another's).
func TestCapHoldsAcrossRestore(t *testing.T) {
	env := natstest.Start(t)
	l, other := restoringLimiter(t, env, "l"), restoringLimiter(t, env, "other")
	const capN, callers, each = 2, 6, 15
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: capN}}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var held, peak atomic.Int64
	hold := func() {
		if n := held.Add(1); n > peak.Load() {
			peak.Store(n) // (racy max: a later Add sees at least as much)
		}
	}
	var olds []*lease
	for i := range capN {
		olds = append(olds, mustAcquire(t, l, "old"+strconv.Itoa(i), lim))
		hold()
	}
	stale := mustAcquire(t, other, "stale", []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: capN + 1}}})
	stale.slots[0].key = olds[0].slots[0].key // (the stale revision of one of the cap's slots)
	stale.slots[0].rev = olds[0].slots[0].rev
	loseSlots(t, env)

	var wg sync.WaitGroup
	var granted, maxSeen atomic.Int64
	errs := make(chan error, callers*each)
	for c := range callers {
		wg.Go(func() {
			for i, ran := 0, 0; ran < each && i < 50*each; i++ { // (refused while the cap is full)
				ls, refusal, err := l.acquireFor(ctx, "c"+strconv.Itoa(c)+"."+strconv.Itoa(i), time.Minute, lim)
				if err != nil {
					errs <- err
					return
				}
				if refusal != nil {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				ran++
				granted.Add(1)
				n := held.Add(1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				held.Add(-1) // (before the release: the slot is still taken until then)
				ls.release(ctx)
			}
		})
	}
	wg.Go(func() {
		for i, old := range olds {
			for range 3 + 3*i {
				old.renew(ctx)
				stale.renew(ctx)
				time.Sleep(5 * time.Millisecond)
			}
			held.Add(-1)
			old.release(ctx)
		}
		stale.release(ctx)
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("limits cannot be checked after the restore: %v", err)
	}
	if m := max(maxSeen.Load(), peak.Load()); m > capN {
		t.Errorf("%d calls held a cap of %d at once after the slots bucket was declared again", m, capN)
	}
	if granted.Load() == 0 {
		t.Error("no call ran after the restore")
	}
	t.Logf("%d calls ran after the restore", granted.Load())
}

// TestRestoreFailureSaysWhy: declaring the limits state again failed; every call that found it
// gone declared it again at once (a burst of calls, a burst of stream requests and error lines),
// and was refused with the error that found the state gone, not with why it could not be
// declared. The declaration is tried once a second at most, and the refusal says why it failed.
func TestRestoreFailureSaysWhy(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	const why = "bucket MCPSTREAM_SLOTS: declared by hand: remove it (nats kv rm MCPSTREAM_SLOTS)"
	var tries atomic.Int64
	l.restore = func(context.Context) error {
		tries.Add(1)
		return errors.New(why)
	}
	loseSlots(t, env)
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, refusal, err := l.acquireFor(ctx, "c"+strconv.Itoa(i), time.Minute, lim)
			if refusal != nil {
				err = errors.New("refused " + refusal.Message)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrLimits) || err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("a call with the limits state gone and not declared again: %v, want ErrLimits saying %q", err, why)
		}
	}
	if n := tries.Load(); n != 1 {
		t.Errorf("declared the state again %d times within a second, want once", n)
	}
}
