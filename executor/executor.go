package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Errors of the Executor's life cycle.
var (
	// ErrNotReady is returned by Run when the registry replay did not finish in time.
	ErrNotReady = errors.New("executor not ready")
	// ErrConfig is returned by New for an unusable configuration.
	ErrConfig = errors.New("bad executor configuration")
)

// ServiceVersion is the micro service version of the executor's discovery service
// (subjects.ExecutorService).
const ServiceVersion = "1.0.0"

// maxExecWaiting caps the Exec requests one front end holds while their calls run.
const maxExecWaiting = 16384

// Executor is one executor process: a front end (request/reply on subjects.ExecAll) and a pool
// of workers on the shared calls consumer, with its own replay of the registry stream.
type Executor struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	reg     *registry
	audit   *auditor
	disp    Dispatcher
	relist  Relister
	relists relistGroup
	st      *state
	// resultsBound is the results stream's max_bytes as last looked up (see resultsMaxBytes).
	resultsBound resultsBound
	lim          *limiter
	// slotLease is the lease the heartbeats renew slots within, in nanoseconds: Config.SlotLease,
	// or the slots bucket's TTL when that is shorter (the bucket keeps the TTL it was created
	// with), as last declared (see applySlots).
	slotLease atomic.Int64
	// What applySlots last warned of (set at start, then under lim.restoreMu): a slots bucket
	// without per-key TTLs, a bucket TTL shorter than SlotLease (0: none); and why declaring
	// the limits state again last failed (restoreLimits).
	slotsNoTTLsWarned bool
	slotsShortWarned  time.Duration
	restoreFailed     string
	flight            flight

	stats    stats
	serving  atomic.Int64 // when the workers started (UnixNano): the start of ReconnectGrace
	ready    atomic.Bool
	stopping chan struct{} // closed when Run begins to stop
	// untaken ends the workers' waits for a call (Next's context): cancelled by cutWorkers
	// when a stopping executor's calls consumer cannot drain (NATS not connected).
	untaken    context.Context
	cutWorkers context.CancelFunc
	// instance is the id of this process's discovery service (micro assigns it, unique), once it
	// runs: what a claim names as its holder, so that a request finding the claim can tell a
	// holder that is gone (see holderGone).
	instance atomic.Pointer[string]
	execSem  chan struct{}
	// execWaiting counts each tenant's share of execSem.
	execWaiting tenantCounts
	// decode bounds the large JSON values decoded for schema validation at once (decodebudget.go).
	decode *byteBudget
	// approvalWaits holds a token per call waiting for approval (Config.MaxApprovalWaits).
	approvalWaits chan struct{}
}

// New returns an executor on nc; Run starts it.
func New(nc *nats.Conn, cfg Config) (*Executor, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrConfig)
	}
	cfg = cfg.withDefaults()
	cfg.Limits.order = specificFirst(cfg.Limits.Tools)
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	for pat := range cfg.Limits.Tools {
		if pat == "" {
			return nil, fmt.Errorf("%w: empty tool pattern in limits", ErrConfig)
		}
	}
	if err := cfg.Limits.check(); err != nil {
		return nil, err
	}
	for _, pat := range cfg.Approve {
		if !policy.ValidPattern(pat) {
			// (It would match nothing: a tool meant to need approval would run without.)
			return nil, fmt.Errorf("%w: approve pattern %q is not a server__tool glob", ErrConfig, pat)
		}
	}
	log := cfg.Log
	red := newRedactor(cfg.Secrets)
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(8192),
		// Rate counters: a lost acknowledgement must not keep its publish pending forever.
		jetstream.WithPublishAsyncTimeout(auditAckWait),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			// Redacted: a rate counter's subject holds the tenant token, the caller's words.
			log.Warn().Err(err).Str("subject", red.StringCut(m.Subject, "…")).Msg("async publish failed")
		}))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	audit, err := newAuditor(nc, red, cfg.AuditBytes, log)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	e := &Executor{
		decode:   newByteBudget(decodeBudget),
		cfg:      cfg,
		nc:       nc,
		js:       js,
		reg:      newRegistryRemembering(log, cfg.hooks.maxRemembered),
		audit:    audit,
		disp:     cfg.Dispatcher,
		relist:   cfg.Relister,
		stopping: make(chan struct{}),
		execSem:  make(chan struct{}, maxExecWaiting),

		approvalWaits: make(chan struct{}, cfg.MaxApprovalWaits),
	}
	e.untaken, e.cutWorkers = context.WithCancel(context.Background())
	e.reg.onApply, e.reg.onWait = cfg.hooks.registryApplied, cfg.hooks.registryWait
	if e.disp == nil {
		e.disp = NATSDispatcher{NC: nc}
	}
	if e.relist == nil {
		e.relist = NATSRelister{NC: nc}
	}
	e.flight.items = map[*inflight]struct{}{}
	return e, nil
}

// Stats counts what one executor process did since it started.
type Stats struct {
	Handled    int64 // call messages taken from the calls stream
	Answered   int64 // terminal answers stored
	Dispatched int64 // tools/call attempts sent to a connector
	Refused    int64 // answers with status refused
	Failed     int64 // answers with status failed (protocol or transport failure, outcome unknown)
	ToolErrors int64 // answers with status ok whose result says isError: true
	// Seconds is the total time from a worker taking a call to its answer stored (approval
	// waits included): with Answered, the mean.
	Seconds float64
	// AuditFailed counts audit publishes that failed or were not acknowledged in time: each is
	// queued to be published again, unless the queue is full. AuditDropped counts the audit
	// events given up (the queue was full, or the executor stopped before it could store them).
	// Both are logged.
	AuditFailed  int64
	AuditDropped int64
	// RegistrySeq is the last registry stream sequence the executor applied; RegistryLast the
	// stream's last sequence as it last saw it (each message taken, and the stream's info
	// every 5 s).
	RegistrySeq, RegistryLast uint64
	// RegistryLag is how many messages of the registry up to RegistryLast the executor has not
	// applied yet: RegistryLast − RegistrySeq, less the messages up to the stream's last
	// sequence when it started that were deleted before it read them (confirmations whose TTL
	// ran out while it was stopped), known once it took everything after its position.
	RegistryLag uint64
}

type stats struct {
	handled, answered, dispatched, refused, failed, toolErrors atomic.Int64
	nanos                                                      atomic.Int64
}

// Stats returns the process's counters.
func (e *Executor) Stats() Stats {
	return Stats{Handled: e.stats.handled.Load(), Answered: e.stats.answered.Load(),
		Dispatched: e.stats.dispatched.Load(), Refused: e.stats.refused.Load(), Failed: e.stats.failed.Load(),
		ToolErrors: e.stats.toolErrors.Load(), Seconds: float64(e.stats.nanos.Load()) / 1e9,
		AuditFailed: e.audit.failed.Load(), AuditDropped: e.audit.dropped.Load(),
		RegistrySeq: e.reg.applied.Load(), RegistryLast: e.reg.streamLast.Load(), RegistryLag: e.reg.lag()}
}

// Ready reports whether the executor serves: registry replayed, front end and workers running.
func (e *Executor) Ready() bool { return e.ready.Load() }

// Run declares the executor's JetStream state, replays the registry, then serves until ctx is
// done. On stop it stops taking calls, hands back calls waiting for approval (nak after
// handBackDelay: another executor, or this one restarted, takes them) and lets dispatched calls
// finish (within StopGrace). With NATS not connected it does not wait for the drain of its
// calls consumer, which only the server can confirm: only for the calls in flight.
func (e *Executor) Run(ctx context.Context) error {
	st, err := ensureState(ctx, e.js, e.cfg, !e.cfg.NoWorkers)
	if err != nil {
		return err
	}
	e.st = st
	e.lim = &limiter{js: e.js, stream: st.limits, slots: st.slots, now: time.Now, owner: e.cfg.Name, prev: map[string]prevWindow{},
		uncapped: !e.cfg.Limits.capped()}
	e.applySlots(ctx, st)
	if e.cfg.hooks.hostClock != nil {
		e.lim.now = e.cfg.hooks.hostClock
	}
	if e.cfg.hooks.rateClock != nil {
		e.lim.now = e.cfg.hooks.rateClock // (the window clock itself: not corrected)
	} else {
		// The rate windows follow the clock of the server of the limits stream, which every
		// executor shares, not each host's (see windowNow).
		lstream := st.limits
		e.lim.serverTime = func(ctx context.Context) (time.Time, error) {
			info, err := lstream.Info(ctx)
			if err != nil {
				return time.Time{}, err
			}
			return info.TimeStamp, nil
		}
	}
	e.lim.restore = e.restoreLimits
	e.lim.restoreBound = e.cfg.hooks.restoreWait // (0: restoreWait)

	var bg sync.WaitGroup
	defer bg.Wait()
	bgCtx, cancelBg := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBg()
	bg.Go(func() { e.audit.republish(bgCtx) })

	if !e.cfg.NoWorkers {
		ready := make(chan struct{})
		errc := make(chan error, 1)
		bg.Go(func() { errc <- e.reg.follow(bgCtx, e.js, ready) })
		timer := time.NewTimer(e.cfg.ReadyTimeout)
		defer timer.Stop()
		select {
		case <-ready:
		case err := <-errc:
			return err
		case <-timer.C:
			return fmt.Errorf("%w: registry replay took longer than %s", ErrNotReady, e.cfg.ReadyTimeout)
		case <-ctx.Done():
			return nil
		}
	}

	var execSub *nats.Subscription
	if *e.cfg.FrontEnd {
		execSub, err = e.nc.QueueSubscribe(subjects.ExecAll, subjects.ExecutorQueue, e.onExec)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subjects.ExecAll, err)
		}
		execSub.SetPendingLimits(-1, -1)
	}

	e.serving.Store(time.Now().UnixNano())
	var workers sync.WaitGroup
	var iters []*workerIter
	if !e.cfg.NoWorkers {
		// Each worker has its own iterator asking for one call at a time, from inside Next
		// (where an iterator pulls): a call is delivered only to a worker waiting for it. One
		// iterator shared by all workers with a batch of Workers delivered calls into its
		// buffer while every worker was busy, where no progress heartbeat kept them: after
		// AckWait JetStream redelivered them to another executor and both copies ran
		// (at-most-once broken, two answers). A shared iterator of batch 1 serialized the
		// pulls (half the throughput at 64 callers), and shared by a few workers each it lost
		// pull requests now and then (30 s stalls until the missing heartbeats were noticed).
		// A pull request waits per worker: the consumer takes maxWaiting.
		for range e.cfg.Workers {
			iter, err := st.calls.Messages(workerPull()...)
			if err != nil {
				for _, w := range iters {
					w.it.Stop()
				}
				return fmt.Errorf("consume %s: %w", subjects.CallsStream, err)
			}
			iters = append(iters, &workerIter{it: iter})
		}
		bg.Go(func() { e.heartbeats(bgCtx) })
		for _, w := range iters {
			workers.Go(func() { e.work(w) })
		}
	}
	svc := e.startService()
	if svc != nil {
		// Claims name the instance only once it answers its own ping: a NATS user that may
		// not subscribe to $SRV.> gets a service that never answers, and a holder whose pings
		// get no responders is taken for gone (holderGone).
		id := svc.Info().ID
		if subj, err := micro.ControlSubject(micro.PingVerb, subjects.ExecutorService, id); err == nil {
			if _, err := e.nc.Request(subj, nil, holderPingTimeout); err == nil {
				e.instance.Store(&id)
			} else {
				e.cfg.Log.Warn().Err(err).Str("subject", subj).Msg("executor discovery service does not answer its ping: claims will not name this process, and calls waiting on its claims wait for their deadline")
			}
		}
	}
	// Ready means served: a subscription reaches the server asynchronously, and a caller told
	// "ready" must not get no responders. (A failing flush is not fatal: the subscription is
	// registered once the connection is back.)
	if err := e.nc.FlushTimeout(5 * time.Second); err != nil && ctx.Err() == nil {
		e.cfg.Log.Warn().Err(err).Msg("flush before serving")
	}
	e.ready.Store(true)
	e.cfg.Log.Info().Int("workers", e.cfg.Workers).Bool("frontEnd", *e.cfg.FrontEnd).
		Str("instance", e.cfg.Name).Str("policy", e.cfg.Policy.Digest()).Msg("executor serving")

	<-ctx.Done()
	e.ready.Store(false)
	close(e.stopping)
	if execSub != nil {
		execSub.Unsubscribe()
	}
	for _, w := range iters {
		w.drain()
	}
	stopped := make(chan struct{})
	go func() { workers.Wait(); close(stopped) }()
	// A drained iterator closes once the server confirms that nothing more comes (a flush):
	// with NATS away, not before nats.go's flush timeout (10 s), a wait for nothing when no
	// call is in flight. While the connection is down nothing more can come: the workers stop
	// taking calls (cutWorkers) and only the calls they run keep them, within StopGrace.
	grace := time.NewTimer(e.cfg.StopGrace)
	defer grace.Stop()
	down := time.NewTicker(20 * time.Millisecond)
	defer down.Stop()
wait:
	for {
		select {
		case <-stopped:
			break wait
		case <-down.C:
			if e.nc.IsConnected() {
				continue
			}
			down.Stop()
			e.cutWorkers()
			e.flight.mu.Lock()
			n := len(e.flight.items)
			e.flight.mu.Unlock()
			e.cfg.Log.Info().Int("calls", n).Dur("grace", e.cfg.StopGrace).
				Msg("NATS is not connected: the workers stop without waiting for the calls consumer's drain (nothing more can come); calls in flight finish within the grace")
			continue
		case <-grace.C:
		}
		e.flight.mu.Lock()
		n := len(e.flight.items)
		e.flight.mu.Unlock()
		if n > 0 {
			e.cfg.Log.Warn().Int("calls", n).Dur("grace", e.cfg.StopGrace).Msg("stopping with calls still running")
		} else {
			// No call was cut: the consumer's drain did not finish (NATS away, say).
			e.cfg.Log.Warn().Dur("grace", e.cfg.StopGrace).Msg("stopping before the calls consumer drained (no call in flight)")
		}
		break
	}
	// The discovery service is stopped once the calls are done (or cut at StopGrace): until
	// then its instance answers the pings of requests waiting for a claim one of them holds
	// (see holderGone), which would take a stopped service for a holder gone and answer
	// outcome_unknown while the call still runs.
	if svc != nil {
		if err := svc.Stop(); err != nil {
			e.cfg.Log.Debug().Err(err).Msg("stop executor discovery service")
		}
	}
	if err := e.waitAsync(5 * time.Second); err != nil {
		e.cfg.Log.Warn().Err(err).Msg("audit events not flushed")
	}
	return nil
}

// startService adds the executor's discovery service (subjects.ExecutorService): no endpoints,
// only $SRV.PING|INFO|STATS, whose metadata says which policy this process enforces
// (subjects.PolicyInfo: front end and workers alike decide by it), the digest of its limits,
// approval patterns and timeouts (Config.EnforcementDigest) and whether it runs a front end and
// workers. Every executor runs it, --no-front-end ones included. It is for discovery
// only: a failure is logged, and the executor serves all the same (nil service).
func (e *Executor) startService() micro.Service {
	md := subjects.PolicyInfo{Role: subjects.RoleExecutor, Instance: e.cfg.Name, PolicyDigest: e.cfg.Policy.Digest(),
		EnforcementDigest: e.cfg.EnforcementDigest()}.Metadata()
	md["frontEnd"] = strconv.FormatBool(*e.cfg.FrontEnd)
	md["workers"] = strconv.FormatBool(!e.cfg.NoWorkers)
	svc, err := micro.AddService(e.nc, micro.Config{
		Name:        subjects.ExecutorService,
		Version:     ServiceVersion,
		Description: "mcpstream executor: discovery only (calls go to " + subjects.ExecAll + ")",
		Metadata:    md,
	})
	if err != nil {
		e.cfg.Log.Warn().Err(err).Msg("executor discovery service not started: policy checks will not see this executor")
		return nil
	}
	return svc
}

// workerHeartbeat is the idle heartbeat of a worker's pull request. A pull request can be lost
// without a word: one sent at a reconnect to a cluster node whose JetStream has not caught up
// yet is answered "no responders", which nats.go ignores, still counting the request as
// pending. The worker asks again (see repull) only once it misses two heartbeats: with
// nats.go's default (half the 30 s pull expiry) the worker stayed idle for 30 s while the
// executor said it was ready and connected; with this one, for 4 s at most. (Each waiting
// worker costs the server one small status message per heartbeat.)
const workerHeartbeat = 2 * time.Second

// workerPull is the pull of each worker's iterator: one call at a time (see Run), lost pull
// requests noticed within 2 × workerHeartbeat.
func workerPull() []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(1), jetstream.PullHeartbeat(workerHeartbeat)}
}

// workerIter is a worker's consumer iterator: replaced when the consumer is gone (see work) or
// its pull request missed its heartbeats (repull), drained when the executor stops.
type workerIter struct {
	mu         sync.Mutex
	it         jetstream.MessagesContext
	drained    bool
	reopenedAt time.Time
	// repulled is the iterator drained by repull, to be replaced by a new one once it closed.
	repulled jetstream.MessagesContext
}

// repull drains it, the worker's iterator, once it missed two idle heartbeats of its pull
// request: a new iterator asks again (reopen) once the old one has closed. nats.go's iterator
// would ask again itself, on the same inbox, while its first request may still wait at the
// server — heartbeats late, not lost: a starved process, a busy connection — and from then on
// kept two requests open for a worker whose buffer holds one message: while the worker ran a
// call, the other request's heartbeat or call filled it and the client dropped the next one
// (slow consumer), a call dropped so waiting for AckWait (30 s) and a delivery wasted. A
// drained iterator still hands the worker what its request delivered before the server saw
// its inbox go: one request open per worker.
func (w *workerIter) repull(it jetstream.MessagesContext) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.it == it && !w.drained {
		w.repulled = it
		it.Drain()
	}
}

func (w *workerIter) current() jetstream.MessagesContext {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.it
}

func (w *workerIter) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drained = true
	w.it.Drain()
}

// work takes calls from its own iterator and handles them, one at a time, until the executor
// stops: no hand-over between goroutines on the way to a call. Once stopping, a call taken is
// handed back (nak after handBackDelay) rather than after AckWait. An iterator closed while the executor
// runs (its consumer was deleted, say) is replaced, the consumer declared again: workers never
// stop silently while the executor says it is ready.
func (e *Executor) work(w *workerIter) {
	untaken := jetstream.NextContext(e.untaken)
	for {
		it := w.current()
		m, err := it.Next(untaken)
		if e.untaken.Err() != nil {
			// Stopping with NATS away: no more calls taken (one delivered meanwhile is
			// handed back, as once stopping).
			if err == nil {
				m.NakWithDelay(handBackDelay)
			}
			return
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			if !e.reopen(w, it) {
				return
			}
			continue
		}
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			w.repull(it)
			continue
		}
		if err != nil {
			e.cfg.Log.Debug().Err(err).Msg("calls consumer")
			continue
		}
		select {
		case <-e.stopping:
			m.NakWithDelay(handBackDelay)
			continue
		default:
		}
		e.handle(m)
	}
}

// reopen replaces the closed iterator it of w (unless another of its workers did already),
// declaring the consumer again, with backoff until it succeeds or the executor stops (false).
// An iterator that closes again at once is not reopened more than once a second.
func (e *Executor) reopen(w *workerIter, it jetstream.MessagesContext) bool {
	w.mu.Lock()
	if w.it != it || w.drained {
		drained := w.drained
		w.mu.Unlock()
		return !drained
	}
	// Drained by repull: asks again on a new inbox at once, the consumer declared again all the
	// same. It may have been deleted while the drain went on, its "consumer deleted" sent to
	// the inbox let go; a request to a consumer that is gone is answered "no responders",
	// which nats.go ignores: the worker asked again every two heartbeats and took no call.
	repulled := w.repulled == it
	w.repulled = nil
	wait := time.Until(w.reopenedAt.Add(time.Second))
	w.mu.Unlock()
	if wait > 0 && !repulled {
		select {
		case <-e.stopping:
			return false
		case <-time.After(wait):
		}
	}
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0))
	for {
		w.mu.Lock()
		if w.drained {
			w.mu.Unlock()
			return false
		}
		if w.it != it { // another worker on it replaced it meanwhile
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err := e.js.CreateOrUpdateConsumer(ctx, subjects.CallsStream, consumerConfigFor(ctx, e.js, e.cfg))
		cancel()
		if err != nil && repulled {
			// NATS slow or away: asks again on the consumer as it was, declared again at the
			// next repull if its heartbeats are missed again.
			cons, err = e.st.calls, nil
		}
		var next jetstream.MessagesContext
		if err == nil {
			next, err = cons.Messages(workerPull()...)
		}
		if err == nil {
			w.mu.Lock()
			if w.drained || w.it != it {
				done := w.drained
				w.mu.Unlock()
				next.Stop()
				return !done
			}
			w.it, w.reopenedAt = next, time.Now()
			w.mu.Unlock()
			if repulled {
				e.cfg.Log.Debug().Msg("calls consumer pull request missed its heartbeats: asked again on a new inbox")
				return true
			}
			e.cfg.Log.Warn().Msg("calls consumer iterator closed while serving: consumer declared again, consuming again")
			return true
		}
		e.cfg.Log.Error().Err(err).Msg("calls consumer gone; declaring it again")
		select {
		case <-e.stopping:
			return false
		case <-time.After(bo.NextBackOff()):
		}
	}
}

// waitAsync waits up to d for the asynchronous publishes (audit events, rate counters) to be
// acknowledged; audit events queued again are flushed after it (auditor.republish).
func (e *Executor) waitAsync(d time.Duration) error {
	timeout := time.After(d)
	for _, js := range []jetstream.JetStream{e.js, e.audit.js} {
		select {
		case <-js.PublishAsyncComplete():
		case <-timeout:
			return fmt.Errorf("%d async publishes pending", e.js.PublishAsyncPending()+e.audit.pending())
		}
	}
	return nil
}

// inflight is a call message being handled: kept alive by heartbeats.
type inflight struct {
	m          jetstream.Msg
	seq        uint64 // the message's calls stream sequence (0 if unknown)
	start      time.Time
	mu         sync.Mutex
	lease      *lease
	dispatched atomic.Bool // tools/call was sent (or may have been): its outcome may be unknown
	// claiming: this delivery claims, or claimed, its call (see claim, and refuseClaiming: a
	// refusal's claim too, unless given back): it holds the claim
	// until it ends. held is the claim it made (under mu): marked Left if it ends without an
	// answer stored (see leaveClaim).
	claiming atomic.Bool
	held     *heldClaim
	// call is the call the delivery's handler builds (set by process, read by recoverer on the
	// same goroutine): what the audit events of an answer after a panic name.
	call *call
}

type flight struct {
	mu    sync.Mutex
	items map[*inflight]struct{}
}

func (f *flight) add(m jetstream.Msg) *inflight {
	in := &inflight{m: m, start: time.Now()}
	if md, err := m.Metadata(); err == nil {
		in.seq = md.Sequence.Stream
	}
	f.mu.Lock()
	f.items[in] = struct{}{}
	f.mu.Unlock()
	return in
}

func (f *flight) remove(in *inflight) {
	f.mu.Lock()
	delete(f.items, in)
	f.mu.Unlock()
}

// holding reports whether a worker of this process handles a delivery of the calls stream
// message seq that claimed its call (see claim), other than except.
func (f *flight) holding(seq uint64, except *inflight) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for in := range f.items {
		if in != except && in.seq == seq && in.claiming.Load() {
			return true
		}
	}
	return false
}

func (in *inflight) setLease(l *lease) {
	in.mu.Lock()
	in.lease = l
	in.mu.Unlock()
}

// heartbeats tells JetStream that long calls are still in progress (so AckWait only catches
// crashed workers) and renews their concurrency leases.
func (e *Executor) heartbeats(ctx context.Context) {
	every := min(e.cfg.AckWait, time.Duration(e.slotLease.Load())) / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := min(e.cfg.AckWait, time.Duration(e.slotLease.Load())) / 3; now != every {
			every = now // (the slots bucket declared again with another TTL: applySlots)
			t.Reset(every)
		}
		e.flight.mu.Lock()
		var due []*inflight
		for in := range e.flight.items {
			if time.Since(in.start) >= every {
				due = append(due, in)
			}
		}
		e.flight.mu.Unlock()
		for _, in := range due {
			in.m.InProgress()
			in.mu.Lock()
			l := in.lease
			in.mu.Unlock()
			if l != nil {
				l.renew(ctx)
			}
		}
	}
}

// hostNow is this host's clock: time.Now, or the hostClock hook's (tests: a host whose clock
// is off).
func (e *Executor) hostNow() time.Time {
	if f := e.cfg.hooks.hostClock; f != nil {
		return f()
	}
	return time.Now()
}

// restoreWait bounds how long declaring the limits state again (restoreLimits), and the live
// leases taking their slots again, may hold up the calls that found it gone (see
// limiter.restoreState): a request JetStream drops (an update the executor's NATS user may not
// make), or NATS hanging, is otherwise waited for until the call's own deadline.
const restoreWait = 5 * time.Second

// restoreLimits declares the limits stream and the slots bucket again (they are gone: see
// stateLost) and makes the limiter follow them as the start does (applySlots): the bucket
// declared again (by another executor first, maybe of an older mcpstream) may take no per-key
// TTLs, or take them again. A failure is logged once until it changes or the state is back.
// Called under lim.restoreMu, within restoreWait (lim.restoreState).
func (e *Executor) restoreLimits(ctx context.Context) error {
	st, err := ensureState(ctx, e.js, e.cfg, false)
	if err != nil {
		if msg := err.Error(); msg != e.restoreFailed {
			e.restoreFailed = msg
			e.cfg.Log.Error().Err(err).Msg("limits state gone (NATS restarted?); declaring it again failed: calls with rate limits or " +
				"concurrency caps are refused unavailable until it is declared (tried again at the next such call, once a second at most)")
		}
		return err
	}
	e.restoreFailed = ""
	e.cfg.Log.Warn().Msg("limits state gone (NATS restarted?): declared again, the rate windows and slots start over")
	e.applySlots(ctx, st)
	return nil
}

// applySlots makes the limiter and the heartbeats follow the slots bucket as ensureState
// declared it, at start and at each restore alike: slots written with per-key TTLs of the lease
// when the bucket takes them, else without (the bucket's TTL frees them); renewed within the
// bucket's TTL when it is shorter than SlotLease. Each condition is warned of once, when it
// begins.
func (e *Executor) applySlots(ctx context.Context, st *state) {
	lease := e.cfg.SlotLease
	short := time.Duration(0)
	if st.slots != nil {
		if status, err := st.slots.Status(ctx); err == nil && status.TTL() > 0 && status.TTL() < lease {
			short = status.TTL()
			lease = short
		}
	}
	if short > 0 && short != e.slotsShortWarned {
		e.cfg.Log.Warn().Dur("ttl", short).Dur("slotLease", e.cfg.SlotLease).Msg("the slots bucket's TTL is shorter than SlotLease: slots are renewed within the bucket's TTL")
	}
	e.slotsShortWarned = short
	e.slotLease.Store(int64(lease))
	switch {
	case st.slotTTLs:
		if e.slotsNoTTLsWarned {
			e.cfg.Log.Info().Msg("the slots bucket takes per-key TTLs again")
		}
		e.slotsNoTTLsWarned = false
		e.lim.setLease(lease)
	case st.slots != nil:
		if !e.slotsNoTTLsWarned {
			e.cfg.Log.Warn().Str("reason", st.slotsNoTTLs).Msg("the slots bucket takes no per-key TTLs (" + st.slotsNoTTLs + "): a concurrency slot is freed by the bucket's TTL, " +
				"also the slot of a call a crashed executor dispatched that its connector still runs")
		}
		e.slotsNoTTLsWarned = true
		e.lim.setLease(0)
	}
}
