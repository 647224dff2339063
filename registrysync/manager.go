package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// Errors returned by the Manager.
var (
	ErrInvalidConfig = errors.New("invalid server configuration")
	ErrExists        = errors.New("server already configured")
	ErrNotFound      = errors.New("server not found")
	ErrRunning       = errors.New("registrysync already running")
	// ErrServedElsewhere: Remove of a server this Manager does not run while another process
	// runs it (retracting it would hide a server that answers).
	ErrServedElsewhere = errors.New("server is run by a registrysync process")
)

// Manager runs one connector per configured MCP server and serves the relist and dispatch
// endpoints. Create it with New, then call Run.
type Manager struct {
	id  string // this process's connector id, in its statuses and heartbeats
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg Config
	log zerolog.Logger
	// changedN numbers the ListChanged events this process publishes (their Nats-Msg-Id).
	changedN atomic.Uint64
	// msgTTLRefused is when (Unix ns) the registry stream last refused a per-message TTL (a
	// stream declared without allow_msg_ttl): see publishConfirmed.
	msgTTLRefused atomic.Int64

	// beforeDispatch, when set, runs on a dispatch handler's goroutine before the call (a
	// test seam: it lets a test make the handler panic).
	beforeDispatch atomic.Pointer[func(server string)]
	// beforeClaim, when set, runs before a claim reads the server's last status (a test seam:
	// it lets a test count the claims that run at once).
	beforeClaim atomic.Pointer[func(server string)]
	// afterNotified, when set, runs on a connector's notifier once it has handled a
	// notification of kind (stored its ListChanged, or not: one waited already): a test seam,
	// it lets a test order another connector's answer after that.
	afterNotified atomic.Pointer[func(server string, kind subjects.Kind)]
	// afterProbe, when set, runs once a servedElsewhere probe's request has ended (answered,
	// refused or timed out), before its answer is read: a test seam, it lets a test check
	// that a stopping Manager's probes all run at once.
	afterProbe atomic.Pointer[func(server string)]
	// afterClaimRead, when set, runs in awaitClaims once it has read a status (a test seam: it
	// lets a test make the ordered consumer start again midway).
	afterClaimRead atomic.Pointer[func()]
	// retryChosen, when set, is told every wait a connector chose before its next attempt (a
	// reconnection, or a re-list of the kinds that failed): a test seam, it lets a test check
	// the wait without a clock.
	retryChosen atomic.Pointer[func(server string, what string, wait time.Duration)]
	// retireBudget is the budget of the retire that ends Run: retireTimeout (a test may give
	// more, set before Run).
	retireBudget time.Duration
	// lineBytes caps one JSON-RPC line from a stdio server: maxLineBytes (a test may give
	// less, set before Run, so that a line over it costs a few MiB, not 64).
	lineBytes int
	// publishWait bounds one JetStream publish or stream read: publishTimeout (a test may give
	// less, set before Run, so that each read while NATS is away fails sooner).
	publishWait time.Duration

	// retiring is set while a stopping Run retires its servers (see retire): the heartbeats,
	// which go on meanwhile, reclaim nothing then (see reclaim).
	retiring atomic.Bool

	mu      sync.Mutex
	conns   map[string]*connector
	running bool
	runCtx  context.Context
	ready   bool // endpoints up
	badCfg  error

	streamMu sync.Mutex
	stream   jetstream.Stream
	// streamCreated is the creation time of the registry stream the connectors wrote to, as
	// last read (see checkStream). Guarded by streamMu.
	streamCreated time.Time
	// checking: a checkStream runs (one at a time).
	checking atomic.Bool

	calls    chan struct{} // semaphore of NATS dispatches in flight
	reads    chan struct{} // semaphore of registry stream reads in flight (maxStreamReads)
	handlers sync.WaitGroup

	svc    micro.Service                   // while running
	served map[string][]*nats.Subscription // while running: the relist and dispatch endpoints of each server

	// childMu guards children, the stdio children started and not yet stopped (see
	// trackChild), and killed, set by KillChildren: a child started after it is killed at once.
	childMu  sync.Mutex
	children map[*child]struct{}
	killed   bool
	// killedAtStart counts the children killed as they started, KillChildren having run.
	killedAtStart int
}

// New returns a Manager for cfg.Servers. Configuration errors are reported by Run.
func New(js jetstream.JetStream, nc *nats.Conn, cfg Config, log zerolog.Logger) *Manager {
	cfg = cfg.withDefaults()
	m := &Manager{
		id: nuid.Next(), js: js, nc: nc, cfg: cfg,
		log:      log.With().Str("component", "registrysync").Logger(),
		conns:    map[string]*connector{},
		children: map[*child]struct{}{},
		calls:    make(chan struct{}, cfg.MaxConcurrentCalls),
		reads:    make(chan struct{}, maxStreamReads),

		retireBudget: retireTimeout,
		publishWait:  publishTimeout,
		lineBytes:    maxLineBytes,
	}
	var errs []error
	for _, sc := range cfg.Servers {
		sc, err := normalize(sc)
		if err == nil && m.conns[sc.Name] != nil {
			err = fmt.Errorf("%w: %q", ErrExists, sc.Name)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.conns[sc.Name] = newConnector(m, sc)
	}
	m.badCfg = errors.Join(errs...)
	return m
}

// Run starts every connector and the NATS endpoints, and blocks until ctx ends. When it returns,
// every session is closed (after draining calls in flight for up to DrainTimeout) and every
// stdio child has exited. It returns an error only if it could not start.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunning
	}
	if m.badCfg != nil {
		m.mu.Unlock()
		return m.badCfg
	}
	svc, err := m.startService()
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.svc, m.served = svc, map[string][]*nats.Subscription{}
	for name := range m.conns {
		if err := m.serveServer(name); err != nil {
			for name := range m.served {
				m.unserveServer(name)
			}
			_ = svc.Stop()
			m.mu.Unlock()
			return err
		}
	}
	m.running, m.runCtx, m.ready = true, ctx, true
	m.retiring.Store(false)
	// The heartbeats outlive ctx: a stopping process still runs its servers while the calls in
	// flight drain (up to DrainTimeout, which may exceed MissedHeartbeats periods), and must not
	// be declared lost (connector_lost) before it publishes connector_stopped (retire), nor
	// before the process that answers for a server it leaves claims it (see awaitClaims).
	hbCtx, hbStop := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		m.heartbeats(hbCtx)
	}()
	for _, c := range m.conns {
		c.start(ctx)
	}
	m.log.Info().Int("servers", len(m.conns)).Msg("started")
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	m.running, m.ready = false, false
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	for name := range m.served {
		m.unserveServer(name)
	}
	m.mu.Unlock()
	if err := svc.Stop(); err != nil {
		m.log.Warn().Err(err).Msg("stop service")
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.stop(context.Background())
		}()
	}
	wg.Wait()
	m.handlers.Wait()
	m.retiring.Store(true)
	m.retire(conns, m.retireBudget)
	hbStop()
	<-hbDone
	m.log.Info().Msg("stopped")
	return nil
}

// KillChildren sends SIGKILL to the process group of every stdio child this Manager started
// and has not finished stopping (the child and whatever it started: npx's node, a shell
// wrapper's processes), and to any child started after it. It neither waits nor publishes
// anything: it is for a process about to exit without a clean stop (a second Ctrl-C), whose
// children, each in its own process group, the terminal's signal does not reach, and that
// would otherwise be left running if they do not exit when their stdin closes. It is cheap and
// safe to call at any time, from any goroutine, while Run starts or stops; the sessions of the
// killed children are lost as after a crash (a Manager still running reconnects them, and
// kills the new children at once).
func (m *Manager) KillChildren() {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	m.killed = true
	for ch := range m.children {
		signalGroup(ch.cmd, true)
	}
}

// trackChild records ch, a stdio child just started, for KillChildren (killing it at once if
// KillChildren ran already); the returned func forgets it, once it is stopped.
func (m *Manager) trackChild(ch *child) (forget func()) {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	m.children[ch] = struct{}{}
	if m.killed {
		signalGroup(ch.cmd, true)
		m.killedAtStart++
	}
	return func() {
		m.childMu.Lock()
		delete(m.children, ch)
		m.childMu.Unlock()
	}
}

// retireTimeout bounds how long a stopping Manager spends publishing its servers' last status.
const retireTimeout = 5 * time.Second

// retirePublishers bounds how many stopped statuses a stopping Manager publishes at once.
const retirePublishers = 64

// retire publishes status unavailable (connector_stopped) for every server of conns that no
// other process serves, once their connectors have stopped: the catalog then hides their tools
// and executors refuse their calls with that reason, instead of both showing the last status
// (ready) until the process runs again. A server another process still answers for (two
// processes running the same servers) keeps its status, which that process claims (see
// Manager.claim): while the status still names this process, retire waits for the claim
// (awaitClaims), its heartbeats still going (Run stops them once retire returns).
//
// Every server is probed at once and retired as soon as its probe ends, all under the one
// budget (retireTimeout when Run returns): a probe that waits its whole timeout (a silent
// subscriber answers none) costs probeTimeout once, however many servers there are, rather
// than once per batch. Only the publishes, which do work on JetStream, are bounded
// (retirePublishers). The servers left when the budget runs out are logged by name.
func (m *Manager) retire(conns []*connector, budget time.Duration) {
	if len(conns) == 0 {
		return
	}
	if m.nc == nil || !m.nc.IsConnected() {
		// Nothing is lost: the watchdogs (package liveness) declare the servers unavailable
		// (connector_lost) once their heartbeats stop, and the next start publishes their
		// status again.
		m.log.Warn().Msg("stopped without publishing the servers' status: NATS is not connected; they are declared lost once their heartbeats are missed (connector_lost), and the next start publishes their status again")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var (
		mu   sync.Mutex
		left []string // servers whose status the budget left unpublished
		wg   sync.WaitGroup
	)
	giveUp := func(c *connector) {
		mu.Lock()
		left = append(left, c.sc.Name)
		mu.Unlock()
	}
	publishers := make(chan struct{}, retirePublishers)
	handed := map[string]bool{} // servers another process answered for (guarded by mu)
	for _, c := range conns {
		wg.Go(func() {
			if m.servedElsewhere(ctx, c.sc.Name) {
				mu.Lock()
				if ctx.Err() != nil {
					left = append(left, c.sc.Name) // the probe was cut short (the cautious answer): nobody knows
				} else {
					handed[c.sc.Name] = true
				}
				mu.Unlock()
				return
			}
			select {
			case publishers <- struct{}{}:
				defer func() { <-publishers }()
			case <-ctx.Done():
				giveUp(c)
				return
			}
			st := c.newStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped, "the registrysync that runs this server stopped")
			st.HeartbeatMs = 0 // no longer beating: nothing to watch
			if err := m.retireOne(ctx, c, st); err != nil {
				if ctx.Err() != nil {
					giveUp(c)
					return
				}
				m.log.Warn().Err(err).Str("server", c.sc.Name).Msg("cannot publish the stopped status")
			}
		})
	}
	wg.Wait()
	if len(left) > 0 {
		slices.Sort(left)
		m.log.Warn().Int("servers", len(left)).Strs("names", left).Dur("budget", budget).
			Msg("stopped without publishing these servers' status: time is up")
	}
	if len(handed) > 0 && m.cfg.HeartbeatEvery > 0 {
		m.awaitClaims(ctx, handed, 2*m.cfg.HeartbeatEvery+claimMargin)
	}
}

// claimMargin is what awaitClaims allows, past the two heartbeat periods a claim may wait (the
// cadence of the claims: see Manager.claim), for the claim's own stream read and publish and
// for this process to read it.
const claimMargin = time.Second

// awaitClaims waits until the last status of none of servers (those another process answered
// a stopping process's probe for) names this process any more as the one that runs it and
// beats (subjects.MissedHeartbeats), for at most wait (and until ctx ends): the process that
// answered claims them (Manager.claim), up to a heartbeat period late, later on a loaded host
// or with a slow NATS, and the heartbeats of this process, which go on meanwhile, keep the
// watchdogs from declaring them lost (connector_lost) until the claims land. A server whose last
// status names another process already, or none (or malformed, or not beating), is not
// waited for: no claim comes for it. One ordered consumer reads the last status of every
// server, then those that come, however many servers there are; NATS going away ends the wait
// (no heartbeat gets out then anyway). A claim that does not come in time (the other process
// stopping too, or too slow) is logged: a watchdog may declare the server lost, and the
// process that runs it then publishes its status again (see heartbeats).
func (m *Manager) awaitClaims(ctx context.Context, servers map[string]bool, wait time.Duration) {
	if m.nc == nil || m.js == nil || len(servers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// NATS away: stop waiting (checked once the listener is registered, so that a loss in
	// between is not missed).
	away := m.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer m.nc.RemoveStatusListener(away)
	if !m.nc.IsConnected() {
		return
	}
	var watching sync.WaitGroup
	defer watching.Wait()
	defer cancel()
	watching.Go(func() {
		select {
		case <-away:
			cancel()
		case <-ctx.Done():
		}
	})
	pending := maps.Clone(servers)
	defer func() {
		if len(pending) > 0 {
			names := slices.Sorted(maps.Keys(pending))
			m.log.Warn().Int("servers", len(names)).Strs("names", names[:min(len(names), 100)]).
				Msg("stopped before the process that answers for these servers claimed them: their status still names this process, and watchdogs may declare them lost (connector_lost) until that process publishes it again")
		}
	}()
	st, err := m.registryStream(ctx)
	if err != nil {
		return
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.RegistryAllStatus},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		// (no retries for good: the stream lost, the wait ends with ctx at the latest)
		MaxResetAttempts: 1,
	})
	if err != nil {
		return
	}
	it, err := cons.Messages()
	if err != nil {
		return
	}
	defer it.Stop()
	// mine: the servers of pending whose status read last names this process. Until every
	// server's last status is read (caught up), a status read may not be its server's last:
	// made again (a gap, a missed heartbeat, deleted), the ordered consumer goes on from where
	// it was in the stream's history, older statuses included, not from each server's last.
	mine := map[string]bool{}
	caught := false
	caughtUp := func() {
		// Every server's last status read: one that does not name this process (claimed, or
		// none) is waited for no more.
		caught = true
		for name := range pending {
			if !mine[name] {
				delete(pending, name)
			}
		}
	}
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		caughtUp()
	}
	for len(pending) > 0 {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		if subj, err := subjects.ParseRegistry(msg.Subject()); err == nil && pending[subj.Server] {
			ev, err := subjects.DecodeRegistryMsg(msg.Subject(), msg.Data())
			// Still this process's: its claim is to come.
			mine[subj.Server] = err == nil && ev.Status != nil && ev.Status.Connector == m.id && ev.Status.HeartbeatMs > 0 && ev.Status.Status != subjects.StatusRemoved
			if caught && !mine[subj.Server] {
				delete(pending, subj.Server)
			}
		}
		if hook := m.afterClaimRead.Load(); hook != nil {
			(*hook)()
		}
		if meta.NumPending == 0 {
			caughtUp()
		}
	}
}

// retireOne publishes c's stopped status st, unless Remove took c meanwhile, or the server was
// removed from the stream meanwhile (`servers remove` once this process no longer answered for
// it): "removed" stays the last word.
func (m *Manager) retireOne(ctx context.Context, c *connector, st subjects.Status) error {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if m.connector(c.sc.Name) != c {
		return nil
	}
	for {
		last, err := m.lastMsg(ctx, subjects.RegistryStatus(c.sc.Name))
		if err != nil {
			return err
		}
		var opts []jetstream.PublishOpt
		if last != nil {
			if ev, err := subjects.DecodeRegistryMsg(last.Subject, last.Data); err == nil && ev.Status != nil && ev.Status.Status == subjects.StatusRemoved {
				return nil
			}
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last.Sequence))
		}
		err = c.publishStatus(ctx, st, opts...)
		if subjects.WrongLastSequence(err) {
			continue // a status landed meanwhile: read it
		}
		if err != nil {
			return err
		}
		break
	}
	c.mu.Lock()
	c.status = st
	c.mu.Unlock()
	return nil
}

// probeKind is the kind a servedElsewhere probe asks for: no server lists it, so a registrysync
// that runs the server answers at once (bad_request), without listing anything.
const probeKind subjects.Kind = "served-elsewhere-probe"

// probeFromHeader names the process that sends a servedElsewhere probe (its connector id).
const probeFromHeader = "Mcpstream-Probe-From"

// probeTimeout bounds how long servedElsewhere waits for an answer.
const probeTimeout = time.Second

// connectorOf names the registrysync process that server's last status says runs it, as
// " (NAME)" for an error message, or "" when it cannot be read (an `up` process is one: its
// name is `up`'s --name and host).
func (m *Manager) connectorOf(ctx context.Context, server string) string {
	if m.js == nil {
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	msg, err := m.lastMsg(rctx, subjects.RegistryStatus(server))
	if err != nil || msg == nil {
		return ""
	}
	ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
	if err != nil || ev.Status == nil || ev.Status.Connector == "" {
		return ""
	}
	return " (" + printable(truncate(ev.Status.Connector, 200)) + ")"
}

// servedElsewhere reports whether another process answers the server's relist endpoint (this
// one no longer does). Only an answer counts as somebody: a RelistReply within probeTimeout, or
// any failure but "no responders" and a timeout (NATS away: the cautious answer). A subscriber
// that never answers — an operator's `nats sub '>'` — is nobody; a registrysync answers the
// probe from its own goroutine, without listing (probeKind). One too slow is taken for nobody
// all the same: it reclaims what was published meanwhile (Manager.disowned).
func (m *Manager) servedElsewhere(ctx context.Context, server string) bool {
	if m.nc == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req := nats.NewMsg(subjects.Relist(server))
	req.Data, _ = json.Marshal(subjects.RelistRequest{V: subjects.Version, Kind: probeKind, Why: "is the server served elsewhere?"})
	req.Header.Set(probeFromHeader, m.id) // the answering process claims the server only from the process its status names
	msg, err := m.nc.RequestMsgWithContext(pctx, req)
	if hook := m.afterProbe.Load(); hook != nil {
		(*hook)(server)
	}
	switch {
	case err == nil:
		var r subjects.RelistReply
		return json.Unmarshal(msg.Data, &r) == nil && r.V >= 1
	case errors.Is(err, nats.ErrNoResponders):
		return false
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return false // subscribed, but nobody answered
	}
	return true
}

// Add configures and (when running) starts one more server.
func (m *Manager) Add(ctx context.Context, sc ServerConfig) error {
	sc, err := normalize(sc)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns[sc.Name] != nil {
		return fmt.Errorf("%w: %q", ErrExists, sc.Name)
	}
	if m.running {
		if err := m.serveServer(sc.Name); err != nil {
			return err
		}
	}
	c := newConnector(m, sc)
	m.conns[sc.Name] = c
	if m.running {
		c.start(m.runCtx)
	}
	m.log.Info().Str("server", sc.Name).Msg("server added")
	return nil
}

// Remove stops a server's connector (calls in flight get up to DrainTimeout), then publishes its
// status "removed" and an empty snapshot of every kind it had on the stream, so consumers see
// every one of its tools, prompts and resources removed. A name this Manager does not run is
// still retracted if the stream holds snapshots or a status of it (a server dropped from the
// configuration while registrysync was down) and no other process runs it (else ErrServedElsewhere);
// ErrNotFound means there was nothing at all.
func (m *Manager) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	c := m.conns[name]
	delete(m.conns, name)
	m.unserveServer(name) // another process may run it next
	m.mu.Unlock()
	known := c != nil
	if c == nil {
		if m.servedElsewhere(ctx, name) {
			return fmt.Errorf("%w%s: %q (remove it from that process's configuration and restart that process first)", ErrServedElsewhere, m.connectorOf(ctx, name), name)
		}
		c = newConnector(m, ServerConfig{Name: name})
	} else if err := c.stop(ctx); err != nil {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	if !c.isLoaded() {
		if err := c.loadState(ctx); err != nil {
			return fmt.Errorf("remove %q: %w", name, err)
		}
	}
	had := false
	for _, k := range subjects.Kinds {
		if st := c.kind(k); st.known {
			had = true
		}
	}
	if !known && !had {
		// A server that never listed (it never connected) has only statuses: `servers` lists
		// it all the same.
		last, err := m.lastMsg(ctx, subjects.RegistryStatus(name))
		if err != nil {
			return fmt.Errorf("remove %q: %w", name, err)
		}
		if last == nil {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
	}
	// statusMu: a reclaim of the server publishing its status meanwhile lands before this.
	st := c.newStatus(subjects.StatusRemoved, "", "removed from the configuration")
	c.statusMu.Lock()
	err := c.publishStatus(ctx, st)
	if err == nil {
		c.mu.Lock()
		c.status = st
		c.mu.Unlock()
	}
	c.statusMu.Unlock()
	if err != nil {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	info := &subjects.ServerInfo{Description: c.sc.Description, Transport: c.sc.Transport}
	for _, k := range subjects.Kinds {
		if st := c.kind(k); !st.known || st.empty {
			continue
		}
		if _, err := c.publishSnapshot(ctx, &listing{Kind: k, Items: []json.RawMessage{}}, info); err != nil {
			return fmt.Errorf("remove %q: retract %s: %w", name, k, err)
		}
	}
	m.log.Info().Str("server", name).Msg("server removed")
	return nil
}

// Statuses returns every configured server's current status (including attempt and retry time,
// which are published only when status or code change).
func (m *Manager) Statuses() map[string]subjects.Status {
	m.mu.Lock()
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	out := make(map[string]subjects.Status, len(conns))
	for _, c := range conns {
		out[c.sc.Name] = c.current()
	}
	return out
}

// Ready reports whether Run has its endpoints up and every server has the outcome of its first
// connection attempt published, whatever it is: its lists and ready status, or the status of
// the failure (Statuses tells which servers are ready). A caller that sees Ready finds every
// server that connected listed and ready, not listed with its status still connecting.
func (m *Manager) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return false
	}
	for _, c := range m.conns {
		c.mu.Lock()
		attempted := c.attempted
		c.mu.Unlock()
		if !attempted {
			return false
		}
	}
	return true
}

// Servers lists the configured server names, sorted.
func (m *Manager) Servers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.conns))
	for n := range m.conns {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Serves reports whether name is one of this manager's servers (its Dispatch and Relist
// answer for it; other servers are some other registrysync process's).
func (m *Manager) Serves(name string) bool { return m.connector(name) != nil }

func (m *Manager) connector(name string) *connector {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns[name]
}

// Relist re-lists a server now (one kind, or every kind when req.Kind is empty) and publishes
// what changed. It is what the relist endpoint runs.
func (m *Manager) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	c := m.connector(server)
	if c == nil {
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
			Code: subjects.CodeNotFound, Message: "no server " + server + " is configured"}}
	}
	kinds := c.kinds
	if req.Kind != "" {
		if !req.Kind.Valid() {
			return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
				Code: subjects.CodeBadRequest, Message: "unknown kind " + string(req.Kind)}}
		}
		if !c.lists(req.Kind) {
			return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
				Code: subjects.CodeNotFound, Message: "server " + server + " is not configured to list " + string(req.Kind)}}
		}
		kinds = []subjects.Kind{req.Kind}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(len(kinds)+1)*m.cfg.ListTimeout)
		defer cancel()
	}
	return c.relistNow(ctx, kinds)
}

// Validate checks a server configuration as Run and Add will: a configuration file can be
// refused before anything starts.
func Validate(sc ServerConfig) error {
	_, err := normalize(sc)
	return err
}

// MaxServerNameBytes is the longest server name registrysync runs: no registry subject holds a
// longer one (its token, each byte escaped, at most three times as long).
const MaxServerNameBytes = 128

// normalize checks a server configuration and fills in what can be inferred.
func normalize(sc ServerConfig) (ServerConfig, error) {
	bad := func(format string, args ...any) (ServerConfig, error) {
		return sc, fmt.Errorf("%w: server %q: %s", ErrInvalidConfig, sc.Name, fmt.Sprintf(format, args...))
	}
	if sc.Name == "" {
		return bad("a name is required")
	}
	if len(sc.Name) > MaxServerNameBytes || strings.IndexFunc(sc.Name, unicode.IsControl) >= 0 {
		return bad("the name must be at most %d bytes without control characters", MaxServerNameBytes)
	}
	if sc.Transport == "" {
		switch {
		case sc.Command != "":
			sc.Transport = TransportStdio
		case sc.URL != "":
			sc.Transport = TransportHTTP
		}
	}
	switch sc.Transport {
	case TransportStdio:
		if sc.Command == "" {
			return bad("stdio needs a command")
		}
		// No process starts with a NUL byte in its command line or environment, and a name
		// holding '=' would set another variable (values are not quoted: they may be secrets).
		if strings.IndexByte(sc.Command, 0) >= 0 || slices.ContainsFunc(sc.Args, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
			return bad("the command and its args must not hold a NUL byte")
		}
		for k, v := range sc.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return bad("env: %q is not an environment variable name", k)
			}
			if strings.IndexByte(v, 0) >= 0 {
				return bad("env: the value of %q holds a NUL byte", k)
			}
		}
	case TransportHTTP, TransportSSE:
		u, err := url.Parse(sc.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("%s needs an http(s) URL", sc.Transport)
		}
	default:
		return bad("unknown transport %q (stdio, http or sse)", sc.Transport)
	}
	for _, k := range sc.Kinds {
		if !subjects.Kind(k).Valid() {
			return bad("unknown kind %q (tools, prompts or resources)", k)
		}
	}
	if sc.ProtocolVersion != "" && !slices.Contains(mcp.ValidProtocolVersions, sc.ProtocolVersion) {
		return bad("unknown protocol version %q", sc.ProtocolVersion)
	}
	if sc.CallTimeout < 0 {
		sc.CallTimeout = 0
	}
	return sc, nil
}
