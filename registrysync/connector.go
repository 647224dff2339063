package registrysync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// maxDebounceFactor bounds how long a steady stream of list_changed notifications can postpone
// the re-list: at most this many Debounce periods after the first one.
const maxDebounceFactor = 10

// spuriousFree is how many re-lists in a row after a list_changed may find the list unchanged
// before the kind's re-lists after a list_changed are delayed (relistDelay), gently: each such
// cycle stores a ListChanged and a Confirmed event (a few hundred bytes, whatever the list's
// size; no copy of the list), and the list stays stale only until the re-list, so the delay
// stops growing at maxDebounceFactor debounces.
const spuriousFree = 2

// connector keeps one configured server in sync. Its loop goroutine owns the session life cycle
// and every list; a notifier goroutine publishes ListChanged events as soon as they arrive.
type connector struct {
	m     *Manager
	sc    ServerConfig
	kinds []subjects.Kind // configured kinds, in subjects.Kinds order
	log   zerolog.Logger
	red   redactor

	// changedUnread: reading the last list_changed from the stream failed (NATS away) and has
	// not succeeded since. The failure is logged once per outage, not at every retry.
	changedUnread atomic.Bool

	// legacyHTTP is the protocol of a streamable HTTP server found to be legacy (loop only).
	legacyHTTP string
	// legacyPassing: legacyHTTP was found after a server/discover that failed for a passing
	// reason (discover.go): it holds for one connection, and the next probes again (loop only).
	legacyPassing bool
	// listWait is, per kind whose last list its server refused HTTP 429 or 503 with a
	// Retry-After, until when it is not to be listed and that failure (loop only). It outlives
	// the session: a reconnection meanwhile holds the kind until then as well.
	listWait map[subjects.Kind]heldList

	cancel context.CancelFunc
	done   chan struct{}
	// draining counts the sessions the server refused that wait for their calls in flight
	// before they are closed (closeAfterCalls); the loop waits for them before it returns.
	draining sync.WaitGroup

	statusMu  sync.Mutex      // orders status publishes (publishCurrent, reclaim, Remove, retire)
	taskTools map[string]bool // tools to call as tasks (execution.taskSupport "required"); under mu
	// headerTools are the tools with x-mcp-header annotations (paramheaders.go); under mu.
	headerTools map[string]*mcp.Tool
	mu          sync.Mutex
	sess        *session
	status      subjects.Status // current state, also for Statuses()
	published   struct {
		status, code string
		ok           bool
	}
	attempted bool // first connection attempt finished
	// statusSeq is the stream sequence of the last status this connector stored (0: none
	// since it started, or since restore).
	statusSeq uint64
	// restoring: a restore runs (see Manager.checkStream).
	restoring atomic.Bool
	loaded    bool // kstate read from the stream
	kstate    map[subjects.Kind]kindState
	changed   map[subjects.Kind]bool          // notified, ListChanged not yet published
	gen       map[subjects.Kind]uint64        // notifications seen, per kind
	pubMu     sync.Mutex                      // orders snapshot and ListChanged publishes (see relist)
	skipped   map[subjects.Kind]int           // lists in a row not published: a notification came meanwhile
	spurious  map[subjects.Kind]int           // re-lists in a row after a ListChanged that found the list unchanged
	pending   map[subjects.Kind]pendingRelist // to re-list after the debounce
	// held are the kinds with a notification held back (heldback.go); under pubMu.
	held map[subjects.Kind]*heldBack
	// released is, per kind, the latest generation a stored ListChanged or a published list
	// stands for (release); under pubMu.
	released map[subjects.Kind]uint64
	// sessEnd ends with the serving of sess (under mu): a re-list waiting for the loop to take
	// it is answered then (relistNow), no loop takes it before the next session, if one comes.
	// Kept once sess is nil until the status tells the loss (nil then).
	sessEnd *sessionEnd

	changedSig chan struct{}
	relistSig  chan struct{}
	requests   chan *relistReq
	// relistWaiting counts the on-demand re-lists waiting for the loop or for their answer
	// (relistNow): at most maxRelistWaiting.
	relistWaiting atomic.Int32

	// Claims of the server (Manager.claim), guarded by claimMu: the probe senders not checked
	// yet, whether a claim runs, and when one last published the status.
	claimMu    sync.Mutex
	claimFroms map[string]struct{}
	claiming   bool
	claimedAt  time.Time
}

// maxRelistWaiting bounds the on-demand re-lists of one server that wait at once (each a
// goroutine of the relist endpoint, holding its request for up to a ListTimeout per kind). The
// loop answers them one by one, each a full list of the server: past this many, a newcomer
// would time out behind them anyway, and a client that floods the relist subject would
// otherwise grow the process by a goroutine per request for minutes. The executor asks once
// per server at a time (per process); past the bound a re-list is refused unavailable at once.
const maxRelistWaiting = 64

// pendingRelist is a kind to re-list: when its first and its last notification since it was
// last re-listed came.
type pendingRelist struct{ first, last time.Time }

// relistReq is one on-demand re-list, answered on reply.
type relistReq struct {
	kinds []subjects.Kind
	reply chan subjects.RelistReply
}

func newConnector(m *Manager, sc ServerConfig) *connector {
	c := &connector{
		m:          m,
		sc:         sc,
		log:        m.log.With().Str("server", sc.Name).Str("transport", sc.Transport).Logger(),
		red:        newRedactor(sc),
		done:       make(chan struct{}),
		kstate:     map[subjects.Kind]kindState{},
		changed:    map[subjects.Kind]bool{},
		gen:        map[subjects.Kind]uint64{},
		skipped:    map[subjects.Kind]int{},
		spurious:   map[subjects.Kind]int{},
		pending:    map[subjects.Kind]pendingRelist{},
		changedSig: make(chan struct{}, 1),
		relistSig:  make(chan struct{}, 1),
		requests:   make(chan *relistReq),
		held:       map[subjects.Kind]*heldBack{},
		released:   map[subjects.Kind]uint64{},
		listWait:   map[subjects.Kind]heldList{},
	}
	want := map[string]bool{}
	for _, k := range sc.Kinds {
		want[k] = true
	}
	for _, k := range subjects.Kinds {
		if len(sc.Kinds) == 0 || want[string(k)] {
			c.kinds = append(c.kinds, k)
		}
	}
	c.status = c.newStatus(subjects.StatusConnecting, "", "")
	return c
}

func (c *connector) newStatus(status, code, reason string) subjects.Status {
	st := subjects.Status{
		V: subjects.Version, Type: subjects.EventStatus, Server: c.sc.Name,
		Status: status, Code: code, Reason: printable(quote(c.red, reason, 1000)),
		Description: c.sc.Description, Transport: c.sc.Transport, At: time.Now().UTC(),
		Connector: c.m.id,
	}
	if every := c.m.cfg.HeartbeatEvery; every > 0 && status != subjects.StatusRemoved {
		st.HeartbeatMs = every.Milliseconds()
	}
	return st
}

// start runs the connector until ctx ends; done closes when its session is closed.
func (c *connector) start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.notifier(ctx)
	}()
	go func() {
		defer close(c.done)
		defer wg.Wait()
		for ctx.Err() == nil {
			if c.protect(ctx) {
				return
			}
			// The loop panicked: report and start over after a pause.
			c.setStatus(ctx, c.newStatus(subjects.StatusUnavailable, subjects.CodeInternal, "connector restarted after an internal error"))
			c.mu.Lock()
			c.sessEnd = nil // the status tells the loss now (relistNow), as the loop's does
			c.mu.Unlock()
			sleepCtx(ctx, c.m.cfg.BackoffMax)
		}
	}()
}

// stop ends the connector and waits for it (or for ctx).
func (c *connector) stop(ctx context.Context) error {
	if c.cancel != nil {
		c.cancel()
	} else {
		return nil // never started
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// protect runs the loop, turning a panic into false.
func (c *connector) protect(ctx context.Context) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Str("panic", c.red.String(fmt.Sprint(r))).Str("stack", string(debug.Stack())).Msg("connector panicked")
			ok = false
		}
	}()
	c.loop(ctx)
	return true
}

// recoverPanic is deferred in callbacks that run on mcp-go's goroutines.
func (c *connector) recoverPanic(where string) {
	if r := recover(); r != nil {
		c.log.Error().Str("panic", c.red.String(fmt.Sprint(r))).Str("where", where).Str("stack", string(debug.Stack())).Msg("recovered from panic")
	}
}

func (c *connector) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = c.m.cfg.BackoffInitial
	b.MaxInterval = c.m.cfg.BackoffMax
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxElapsedTime = 0 // forever
	b.Reset()
	return b
}

// loop connects, serves the session until it is lost, and reconnects with backoff, until ctx
// ends. Every session it opens is closed before it returns.
func (c *connector) loop(ctx context.Context) {
	defer c.draining.Wait() // sessions the server refused, closed once their calls are over
	cfg := c.m.cfg
	bo := c.newBackoff()
	for tries := 1; !c.isLoaded(); tries++ {
		if err := c.loadState(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			ev := c.log.Debug()
			if tries == 1 || tries%10 == 0 {
				ev = c.log.Error()
			}
			ev.Err(err).Int("attempt", tries).Msg("cannot read the registry stream (is it declared?); retrying")
			sleepCtx(ctx, bo.NextBackOff())
		}
	}
	bo.Reset()
	attempt := 0
	if c.current().Status != subjects.StatusUnavailable {
		c.setStatus(ctx, c.newStatus(subjects.StatusConnecting, "", ""))
	}
	for ctx.Err() == nil {
		s, err := c.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			attempt++
			wait := retryWait(bo.NextBackOff(), err) // an HTTP 429 or 503's Retry-After
			code, reason := subjects.CodeConnectFailed, err.Error()
			var coded *codedError
			var se *stderrError
			if errors.As(err, &coded) {
				code, reason = coded.code, coded.msg // the handshake's answer was malformed
				if errors.As(err, &se) && se.told != "" {
					reason += " (stderr: " + se.told + ")"
				}
			}
			st := c.newStatus(subjects.StatusUnavailable, code, reason)
			st.Attempt, st.RetryInMs = attempt, wait.Milliseconds()
			ev := c.log.Debug()
			if attempt == 1 || attempt%10 == 0 {
				ev = c.log.Warn()
			}
			ev = c.stderrTail(ev, err)
			ev.Str("reason", st.Reason).Int("attempt", attempt).Dur("retryIn", wait).Msg("connect failed")
			c.setStatus(ctx, st)
			c.settle()
			c.chose("connect", wait)
			sleepCtx(ctx, wait)
			continue
		}
		began := time.Now()
		err = c.serveOrClose(ctx, s)
		if ctx.Err() != nil {
			s.close(cfg.DrainTimeout)
			return
		}
		if refusedSession(err) {
			c.closeAfterCalls(ctx, s, err)
		} else {
			s.close(0)
		}
		if time.Since(began) >= cfg.BackoffMax {
			bo.Reset()
			attempt = 0
		}
		attempt++
		wait := retryWait(bo.NextBackOff(), err)
		st := c.newStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost, err.Error())
		st.Attempt, st.RetryInMs = attempt, wait.Milliseconds()
		c.stderrTail(c.log.Warn(), err).Str("reason", st.Reason).Dur("retryIn", wait).Msg("connection lost")
		c.setStatus(ctx, st)
		c.mu.Lock()
		c.sessEnd = nil // the status tells the loss now (relistNow)
		c.mu.Unlock()
		c.settle()
		c.chose("reconnect", wait)
		sleepCtx(ctx, wait)
	}
}

// refusedSession reports whether a session was lost because the server refused it: it does
// not know the session any more (HTTP 404 on legacy streamable HTTP, to any of its requests,
// the listening GET's included: it restarted, or the session expired), or the host's
// credentials (401).
func refusedSession(err error) bool {
	return errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, transport.ErrAuthorizationRequired)
}

// closeAfterCalls closes s, a session the server refused (refusedSession), once the calls in
// flight on it are over, while the loop reconnects. Closing it at once cut them off (mcp-go's
// Close cancels its requests), and each was answered outcome_unknown, although the server
// answers such a call HTTP 404 (or 401) without running it, as the call then reports; a call
// the server took before it forgot the session gets its answer, or its own failure. Each is
// bounded by its own deadline; once ctx ends (the connector stops), they have DrainTimeout.
func (c *connector) closeAfterCalls(ctx context.Context, s *session, err error) {
	s.markLost(err) // (if a list or a probe found it so, not yet)
	done := s.stopCalls()
	c.draining.Add(1)
	go func() {
		defer c.draining.Done()
		select {
		case <-done:
		case <-ctx.Done():
			waitChan(done, c.m.cfg.DrainTimeout)
		}
		s.close(0)
	}()
}

// chose tells the test seam Manager.retryChosen, if set, the wait before the next attempt.
func (c *connector) chose(what string, wait time.Duration) {
	if hook := c.m.retryChosen.Load(); hook != nil {
		(*hook)(c.sc.Name, what, wait)
	}
}

// stderrTail adds to ev the last stderr lines of the stdio child whose failure err is, if it
// is one (see stderrError): redacted, control characters replaced, at most stderrRecentLines
// lines of 300 bytes and about stderrRecentBytes in all.
func (c *connector) stderrTail(ev *zerolog.Event, err error) *zerolog.Event {
	if tail := stderrOf(err); len(tail) > 0 {
		ev = ev.Strs("stderr", tail)
	}
	return ev
}

// maxSkips bounds how many lists in a row are dropped because a notification came meanwhile.
const maxSkips = 3

func (c *connector) generation(kind subjects.Kind) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen[kind]
}

// skip reports whether a list overtaken by a notification may be dropped, counting it.
func (c *connector) skip(kind subjects.Kind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skipped[kind] >= maxSkips {
		c.skipped[kind] = 0
		return false
	}
	c.skipped[kind]++
	return true
}

// settle records that the first connection attempt has its outcome published: the lists and
// the ready status of a session, or the status of a failure (see Manager.Ready).
func (c *connector) settle() {
	c.mu.Lock()
	c.attempted = true
	c.mu.Unlock()
}

func (c *connector) isLoaded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded
}

// connect opens a session; a legacy streamable HTTP server is reopened with the GET stream
// that carries its notifications.
func (c *connector) connect(ctx context.Context) (*session, error) {
	listening := c.sc.Transport == TransportHTTP && (c.legacyHTTP != "" ||
		c.sc.ProtocolVersion != "" && !mcp.IsModernProtocol(c.sc.ProtocolVersion))
	s, err := openSession(ctx, c, listening)
	if errors.Is(err, errNeedListening) {
		if c.legacyPassing {
			c.log.Info().Str("protocol", c.legacyHTTP).Msg("server/discover failed (no answer in time, or an HTTP 5xx, 408 or 429): " +
				"connecting with initialize for this connection; the next reconnection probes server/discover again")
		}
		c.log.Debug().Str("protocol", c.legacyHTTP).Msg("legacy streamable HTTP server: reconnecting with the GET stream")
		s, err = openSession(ctx, c, true)
		if c.legacyPassing {
			// Not the server's word that it is legacy: forget it once this connection is open.
			c.legacyHTTP, c.legacyPassing = "", false
		}
	}
	if err != nil {
		return nil, err
	}
	// The server's words: redacted and bounded as in the published serverInfo.
	c.log.Info().Str("protocol", s.protocol).Str("serverName", printable(quote(c.red, s.info.Name, maxServerInfoBytes))).
		Str("serverVersion", printable(quote(c.red, s.info.Version, maxServerInfoBytes))).Msg("connected")
	return s, nil
}

// serve lists everything, then follows notifications, resyncs, probes and on-demand re-lists
// until the session is lost (the error says why) or ctx ends.
func (c *connector) serve(ctx context.Context, s *session) (err error) {
	cfg := c.m.cfg
	c.mu.Lock()
	end := &sessionEnd{done: make(chan struct{})}
	c.sess, c.sessEnd = s, end
	// The initial list covers every notification seen so far.
	clear(c.pending)
	c.mu.Unlock()
	defer func() { // (deferred: a panic ends the serving too)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sess, end.err = nil, err
		if err == nil {
			end.err = errors.New("the connector restarted after an internal error")
		}
		close(end.done)
	}()

	failed := map[subjects.Kind]error{}
	// retries holds, per kind whose last list failed, its own backoff and when it is listed
	// again: a kind's retry follows its own failures only (a re-list of other kinds meanwhile
	// neither advances its backoff nor puts its retry off).
	retries := map[subjects.Kind]*kindRetry{}
	// c.listWait holds when a kind that failed may be listed again at the soonest: the
	// Retry-After of the HTTP 429 or 503 that refused its last list, counted from that answer.
	// Until then no re-list asks the server for it (held: the retry timer lists it then), on
	// this session or, after a reconnection, on the next: a kind still held starts failed as
	// it was, its retry due when the wait has run (unless the new session does not offer it:
	// its empty list asks the server nothing, and retracts the old one at once).
	now := time.Now()
	for k, w := range c.listWait {
		if !now.Before(w.until) || !c.lists(k) {
			delete(c.listWait, k)
			continue
		}
		failed[k] = w.err
		retries[k] = &kindRetry{bo: c.newBackoff(), due: w.until}
	}
	var retry, debounce *time.Timer
	timerC := func(t *time.Timer) <-chan time.Time {
		if t == nil {
			return nil
		}
		return t.C
	}
	defer func() {
		for _, t := range []*time.Timer{retry, debounce} {
			if t != nil {
				t.Stop()
			}
		}
	}()

	// relist lists kinds, publishes, updates the status and arms the retry timer. A kind held
	// by its server's Retry-After is not listed: its outcome is the wait left.
	relist := func(kinds []subjects.Kind) (map[subjects.Kind]kindOutcome, error) {
		now := time.Now()
		var listed, held []subjects.Kind
		for _, k := range kinds {
			// (a kind the session does not offer is not asked for: its list, empty, is the
			// connector's own; after a reconnection to a server that dropped it, not held)
			if has, _ := s.declares(k); has && failed[k] != nil && now.Before(c.listWait[k].until) {
				held = append(held, k)
			} else {
				listed = append(listed, k)
			}
		}
		out, err := c.relist(ctx, s, listed, failed)
		if err != nil {
			return nil, err
		}
		c.statusFromFailures(ctx, s, failed)
		if c.current().Status != subjects.StatusConnecting {
			// The first lists and status are published (not while a first tools list dropped
			// for a list_changed keeps the server connecting: Ready promises it listed).
			c.settle()
		}
		if retry != nil {
			retry.Stop()
			retry = nil
		}
		now = time.Now()
		for k, o := range out {
			if ra := retryAfterOf(o.err); ra > 0 && failed[k] != nil {
				c.listWait[k] = heldList{until: now.Add(ra), err: failed[k]}
			} else {
				delete(c.listWait, k)
			}
			if failed[k] == nil {
				delete(retries, k)
				continue
			}
			r := retries[k]
			if r == nil {
				r = &kindRetry{bo: c.newBackoff()}
				retries[k] = r
			}
			if !o.skipped || r.wait == 0 {
				r.wait = r.bo.NextBackOff() // its own failure (a list overtaken by a notification is not)
			}
			r.due = now.Add(r.wait)
			if w, ok := c.listWait[k]; ok && w.until.After(r.due) {
				r.due = w.until // no sooner than its server asked
			}
		}
		for _, k := range held {
			out[k] = kindOutcome{err: withWait(failed[k], c.listWait[k].until.Sub(now)), held: true}
		}
		var next time.Time
		for k := range failed {
			if r := retries[k]; r != nil && (next.IsZero() || r.due.Before(next)) {
				next = r.due
			}
		}
		if !next.IsZero() {
			wait := max(next.Sub(now), 0)
			c.chose("relist", wait)
			retry = time.NewTimer(wait)
		}
		return out, nil
	}
	if _, err := relist(c.kinds); err != nil {
		return err
	}
	// arm sets the debounce timer for the next pending re-list.
	arm := func() {
		due, ok := c.pendingDue(cfg.Debounce, cfg.BackoffMax)
		if debounce != nil {
			debounce.Stop()
			debounce = nil
		}
		if ok {
			debounce = time.NewTimer(time.Until(due))
		}
	}

	var resync, ping <-chan time.Time
	if cfg.ResyncEvery > 0 {
		t := time.NewTicker(cfg.ResyncEvery)
		defer t.Stop()
		resync = t.C
	}
	if cfg.PingEvery > 0 {
		t := time.NewTicker(cfg.PingEvery)
		defer t.Stop()
		ping = t.C
	}
	statusRetry := time.NewTicker(time.Second)
	defer statusRetry.Stop()

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.lost:
			return s.lostErr
		case <-c.relistSig:
			arm()
		case <-timerC(debounce):
			debounce = nil
			kinds := c.takePending(time.Now(), cfg.Debounce, cfg.BackoffMax)
			if len(kinds) > 0 {
				if _, err := relist(kinds); err != nil {
					return err
				}
			}
			arm() // kinds whose re-list is delayed longer (relistDelay) still wait
		case <-resync:
			if _, err := relist(c.kinds); err != nil {
				return err
			}
		case <-timerC(retry):
			retry = nil
			now := time.Now()
			kinds := make([]subjects.Kind, 0, len(failed))
			for _, k := range c.kinds {
				if r := retries[k]; failed[k] != nil && r != nil && !r.due.After(now) {
					kinds = append(kinds, k)
				}
			}
			if _, err := relist(kinds); err != nil {
				return err
			}
		case <-ping:
			if err := s.ping(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("liveness probe failed: %w", err)
			}
		case req := <-c.requests:
			out, err := relist(req.kinds)
			if err != nil {
				req.reply <- subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
					Code: subjects.CodeUnavailable, Message: "connection lost while re-listing", Reason: quote(c.red, err.Error(), 1000)}}
				return err
			}
			req.reply <- c.relistReply(req.kinds, out)
		case <-statusRetry.C:
			c.retryStatus(ctx)
		}
	}
}

// serveOrClose is serve, closing s when serving it panics (protect recovers, and the loop starts
// again): left open, served by nothing, the session lived on beside the next one (a stdio
// server's process, an HTTP server's streams), even once the connector stopped.
func (c *connector) serveOrClose(ctx context.Context, s *session) error {
	served := false
	defer func() {
		if !served {
			s.close(0)
		}
	}()
	err := c.serve(ctx, s)
	served = true
	return err
}

// sessionEnd is the end of the loop's serving of a session: done closes when the loop stops
// serving it (it was lost, or the connector stops); err, set first, says why.
type sessionEnd struct {
	done chan struct{}
	err  error
}

// kindOutcome is the result of re-listing one kind.
type kindOutcome struct {
	fp        string
	seq       uint64
	published bool
	err       error // coded: the list or its publication failed; the session is fine
	// skipped: a notification came during the list, which is not published (nor its failure
	// counted); the re-list it scheduled lists the kind again.
	skipped bool
	// held: not listed, the server's Retry-After for the kind runs (err carries the wait left).
	held bool
}

// heldList is a kind held by its server's Retry-After (connector.listWait): not listed before
// until; err is the failure that asked for it, the kind's outcome meanwhile.
type heldList struct {
	until time.Time
	err   error
}

// kindRetry is the retry of a kind whose list failed: its own backoff, the wait it last drew
// and when the kind is listed again.
type kindRetry struct {
	bo   *backoff.ExponentialBackOff
	wait time.Duration
	due  time.Time
}

// relist lists and publishes kinds. failed is updated: a kind that failed is set, one that
// succeeded is removed. The error is non-nil only when the session is lost.
func (c *connector) relist(ctx context.Context, s *session, kinds []subjects.Kind, failed map[subjects.Kind]error) (map[subjects.Kind]kindOutcome, error) {
	out := make(map[subjects.Kind]kindOutcome, len(kinds))
	info := &subjects.ServerInfo{
		Description: c.sc.Description, Transport: c.sc.Transport, Protocol: s.protocol,
		// the server's words, of any size: bounded, as they go into every snapshot
		Name: quote(c.red, s.info.Name, maxServerInfoBytes), Version: quote(c.red, s.info.Version, maxServerInfoBytes),
	}
	for _, kind := range kinds {
		var l *listing
		var err error
		gen0 := c.generation(kind)
		rerr := c.changedFromStream(ctx, kind) // (under pubMu)
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// NATS trouble: without the stream's last ListChanged the list might answer none
			// of those consumers hold it stale for. The retry timer lists the kind again. Said
			// once until a read succeeds: while NATS is away, every retry of every kind fails
			// the same way.
			ev := c.log.Error()
			if c.changedUnread.Swap(true) {
				ev = c.log.Debug()
			}
			ev.Err(rerr).Str("kind", string(kind)).Msg("cannot read the last list_changed; will retry (said again at debug level until a read succeeds)")
			err := &codedError{code: subjects.CodeUnavailable, msg: rerr.Error(), nats: true}
			failed[kind] = err
			out[kind] = kindOutcome{err: err}
			continue
		}
		if c.changedUnread.Swap(false) {
			c.log.Info().Str("kind", string(kind)).Msg("the last list_changed is read again (NATS is back): listing")
		}
		// The ListChanged events stored before the list begins are those it answers.
		after := c.kind(kind).changedSeq
		if has, _ := s.declares(kind); has {
			l, err = c.list(ctx, s, kind)
		} else {
			// Not (or no longer) offered: an empty list, published only to retract an earlier one.
			l = &listing{Kind: kind, Items: []json.RawMessage{}, Auth: c.sc.AuthContext}
			if st := c.kind(kind); !st.known || st.empty {
				c.pubMu.Lock()
				c.release(kind, gen0) // nothing to list: no answer to wait for
				c.pubMu.Unlock()
				delete(failed, kind)
				out[kind] = kindOutcome{fp: l.fingerprint(), seq: st.seq}
				continue
			}
		}
		if err != nil {
			var lost *lostError
			var coded *codedError
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.As(err, &lost):
				return nil, err
			case !errors.As(err, &coded):
				// A transport error: a probe tells a dead connection from a bad answer, but for
				// an HTTP 429 or 503 with a Retry-After: something answered, and asked to be
				// left alone until the retry (a session that is gone fails that list otherwise).
				if retryAfterOf(err) > 0 {
					err = withWait(codedf(subjects.CodeListFailed, "%v", err), retryAfterOf(err))
					break
				}
				if perr := s.ping(ctx); perr != nil {
					return nil, withWait(fmt.Errorf("%v; liveness probe: %w", err, perr), retryAfterOf(perr))
				}
				err = codedf(subjects.CodeListFailed, "%v", err)
			}
			if c.generation(kind) != gen0 && retryAfterOf(err) == 0 && c.skip(kind) {
				// A list_changed came while listing: the list changed under its pages (a server
				// refusing a cursor of its old list, -32602, or handing out one again), and the
				// re-list the notification scheduled lists it whole. Not the server's failure:
				// neither its status nor the retry backoff hears of it; an on-demand re-list
				// is answered with it. (A refusal with a Retry-After is the server's, whatever
				// came meanwhile: the kind waits for it, the notification's re-list too.)
				c.log.Debug().Str("kind", string(kind)).Str("reason", printable(quote(c.red, err.Error(), 1000))).
					Msg("list failed after a list_changed came during it; waiting for the next one")
				out[kind] = kindOutcome{err: err, skipped: true}
				continue
			}
			// Warn once per code; retries of the same failure go to debug.
			ev := c.log.Warn()
			var prev *codedError
			if errors.As(failed[kind], &prev) && errors.As(err, &coded) && prev.code == coded.code {
				ev = c.log.Debug()
			}
			ev.Str("kind", string(kind)).Str("reason", printable(quote(c.red, err.Error(), 1000))).Msg("list failed")
			failed[kind] = err
			out[kind] = kindOutcome{err: err}
			continue
		}
		// pubMu orders this check and the snapshot's publish against the notifier's ListChanged
		// publish: a notification arriving after the check has its ListChanged stored after this
		// snapshot, so consumers stay stale until the re-list it schedules.
		c.pubMu.Lock()
		prev := c.kind(kind)
		overtaken := c.generation(kind) != gen0
		if overtaken && c.skip(kind) {
			c.pubMu.Unlock()
			// A list_changed came while listing: this list may predate the change, and once
			// stored after the ListChanged event it would look current. The re-list the
			// notification scheduled publishes instead (unless notifications never stop).
			c.log.Debug().Str("kind", string(kind)).Msg("list_changed during the list; waiting for the next one")
			out[kind] = kindOutcome{fp: l.fingerprint(), seq: c.kind(kind).seq, skipped: true}
			continue
		}
		l.AfterSeq = after
		if overtaken {
			// Published anyway (maxSkips lists in a row were dropped), but it may predate the
			// notification that came during it, whose ListChanged may not be on the stream: the
			// notifier stores none while an earlier one waits. Unchanged, it answers no
			// ListChanged (the earlier one stands for the notification); changed, its snapshot
			// lifts every ListChanged, so one is stored again after it (forcedChanged).
			l.AfterSeq = 0
		}
		res, err := c.publishSnapshot(ctx, l, info)
		switch {
		case err == nil && overtaken:
			c.forcedChanged(ctx, kind)
		case err == nil:
			// A list that began after the notifications held back answers them.
			c.release(kind, gen0)
		}
		c.pubMu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var coded *codedError
			if !errors.As(err, &coded) {
				// NATS trouble, not the server's: retry without blaming the server.
				c.log.Error().Err(err).Str("kind", string(kind)).Msg("cannot publish snapshot; will retry")
				err = &codedError{code: subjects.CodeUnavailable, msg: "publish: " + err.Error(), nats: true}
			} else {
				c.log.Warn().Str("kind", string(kind)).Str("reason", printable(quote(c.red, err.Error(), 1000))).Msg("snapshot not published")
			}
			failed[kind] = err
			out[kind] = kindOutcome{err: err}
			continue
		}
		delete(failed, kind)
		c.mu.Lock()
		c.skipped[kind] = 0
		switch {
		case prev.needsConfirm() && prev.known && prev.fp == res.fp:
			// The server said the list changed; it did not.
			c.spurious[kind]++
			if c.spurious[kind] == spuriousFree {
				c.log.Warn().Str("kind", string(kind)).Int("times", spuriousFree).
					Msg("list_changed notifications found the list unchanged: re-lists after one are delayed (up to 10 debounces) until it changes")
			}
		case !prev.known || prev.fp != res.fp:
			c.spurious[kind] = 0
		}
		c.mu.Unlock()
		if l.Redacted > 0 {
			c.log.Warn().Str("kind", string(kind)).Int("items", l.Redacted).Msg("definitions held a configured secret value: redacted")
		}
		if res.published {
			c.log.Info().Str("kind", string(kind)).Int("items", len(l.Items)).Int("rejected", len(l.Rejected)).
				Int("pages", l.Pages).Uint64("seq", res.seq).Msg("snapshot published")
		}
		out[kind] = kindOutcome{fp: res.fp, seq: res.seq, published: res.published}
	}
	return out, nil
}

// list reads every page of one kind. A list too large for an event says what bounds it.
func (c *connector) list(ctx context.Context, s *session, kind subjects.Kind) (l *listing, err error) {
	defer func() { err = c.m.explainTooLarge(err) }()
	cfg := c.m.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.ListTimeout)
	defer cancel()
	acc := newAccumulator(kind, cfg.MaxDefinitionBytes)
	acc.redact = c.red.JSON
	acc.redactText = c.red.Text
	acc.l.Auth = c.sc.AuthContext
	limit := c.m.payloadLimit()
	read := 0 // bytes of the items read, left out or not
	// Cursors seen, by digest: loop detection must not hold MaxPages cursors of up to
	// maxCursorBytes each.
	seen := map[[sha256.Size]byte]bool{}
	cursor := ""
	for {
		maxItems := min(limit/minItemBytes, subjects.MaxSnapshotItems) - len(acc.l.Items) - len(acc.l.Rejected)
		raw, err := s.listPage(ctx, kind, cursor)
		if err != nil {
			return nil, err
		}
		p, err := parsePage(kind, raw, maxItems)
		if err != nil {
			return nil, err
		}
		acc.addPage(p)
		for _, it := range p.items {
			read += len(it)
		}
		// What the snapshot would hold: an item left out (definition_too_large) is not in it.
		if acc.l.Bytes > limit {
			return nil, codedf(subjects.CodeSnapshotTooLarge, "%s list holds more than %d bytes after %d pages", kind, limit, acc.l.Pages)
		}
		if read > maxReadFactor*limit {
			return nil, codedf(subjects.CodeSnapshotTooLarge, "%s list: its items, kept or left out, are more than %d bytes after %d pages", kind, maxReadFactor*limit, acc.l.Pages)
		}
		if p.nextCursor == "" {
			return &acc.l, nil
		}
		digest := sha256.Sum256([]byte(p.nextCursor))
		if seen[digest] || p.nextCursor == cursor {
			return nil, codedf(subjects.CodeMalformedResponse, "%s/list: the server repeated cursor %q", kind, truncate(p.nextCursor, 80))
		}
		if acc.l.Pages >= cfg.MaxPages {
			return nil, codedf(subjects.CodeTooManyPages, "%s/list: still more pages after %d", kind, cfg.MaxPages)
		}
		seen[digest] = true
		cursor = p.nextCursor
	}
}

// statusFromFailures derives the server's status after a (re-)list: unavailable when tools
// could not be listed, ready with a code when only prompts or resources failed (the tools are
// current), connecting while the server's tools have never been published (a first list
// dropped for a list_changed), ready otherwise. NATS publish failures are not the server's and
// change nothing.
func (c *connector) statusFromFailures(ctx context.Context, s *session, failed map[subjects.Kind]error) {
	var st subjects.Status
	first := func() (subjects.Kind, *codedError) {
		for _, k := range c.kinds {
			var coded *codedError
			if err := failed[k]; err != nil && errors.As(err, &coded) && !coded.nats {
				return k, coded
			}
		}
		return "", nil
	}
	kind, coded := first()
	tools, _ := s.declares(subjects.KindTools)
	switch {
	case coded == nil && tools && c.lists(subjects.KindTools) && !c.kind(subjects.KindTools).known:
		// The first tools list was dropped (a list_changed came during it): not ready until
		// the re-list it scheduled publishes the tools.
		st = c.newStatus(subjects.StatusConnecting, "", "")
	case coded == nil:
		st = c.newStatus(subjects.StatusReady, "", "")
	case kind == subjects.KindTools:
		st = c.newStatus(subjects.StatusUnavailable, coded.code, string(kind)+": "+coded.msg)
	default:
		st = c.newStatus(subjects.StatusReady, coded.code, string(kind)+": "+coded.msg)
	}
	st.Protocol = s.protocol
	c.setStatus(ctx, st)
}

// setStatus records st and publishes it when (status, code) differs from the last published.
func (c *connector) setStatus(ctx context.Context, st subjects.Status) {
	c.mu.Lock()
	c.status = st
	same := c.published.ok && c.published.status == st.Status && c.published.code == st.Code
	c.mu.Unlock()
	if same {
		return
	}
	c.publishCurrent(ctx)
}

func (c *connector) publishCurrent(ctx context.Context) {
	c.statusMu.Lock() // the connector's loop and reclaim publish: the last read is the last sent
	defer c.statusMu.Unlock()
	c.publishCurrentLocked(ctx)
}

// publishCurrentLocked is publishCurrent with statusMu held.
func (c *connector) publishCurrentLocked(ctx context.Context) {
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	err := c.publishStatus(ctx, st)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.published.ok = false
		c.log.Error().Err(err).Str("status", st.Status).Msg("cannot publish status; will retry")
		return
	}
	if st.Status == subjects.StatusReady && (c.published.status != st.Status || c.published.code != st.Code) {
		ev := c.log.Info().Str("protocol", st.Protocol)
		if st.Code != "" {
			ev = ev.Str("code", st.Code) // a ready server's note (say, a degraded capability)
		}
		ev.Msg("ready")
	}
	c.published.status, c.published.code, c.published.ok = st.Status, st.Code, true
}

// retryStatus publishes the current status if its last publication failed.
func (c *connector) retryStatus(ctx context.Context) {
	c.mu.Lock()
	ok := c.published.ok && c.published.status == c.status.Status && c.published.code == c.status.Code
	c.mu.Unlock()
	if !ok {
		c.publishCurrent(ctx)
	}
}

func (c *connector) current() subjects.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

func (c *connector) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// forcedChanged follows a list published although a notification came during it (see relist):
// unless a ListChanged still waits for an answer, it stores one for that notification, so that
// consumers hold the list stale until a re-list that began after it (the one the notification
// scheduled). The caller holds pubMu. If the publish fails the notifier tries again.
func (c *connector) forcedChanged(ctx context.Context, kind subjects.Kind) {
	if st := c.kind(kind); st.needsConfirm() {
		return
	}
	if err := c.publishChanged(ctx, kind); err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.Error().Err(err).Str("kind", string(kind)).Msg("cannot publish list_changed after a list it overtook; retrying")
		c.noteChanged(kind)
		return
	}
	c.log.Debug().Str("kind", string(kind)).Msg("list_changed again after a list it overtook")
}

// noteChanged is called from a transport goroutine for a list_changed notification. It never
// blocks: the notifier goroutine publishes the ListChanged event.
func (c *connector) noteChanged(kind subjects.Kind) {
	if !c.lists(kind) {
		return
	}
	c.mu.Lock()
	c.changed[kind] = true
	c.gen[kind]++
	c.mu.Unlock()
	select {
	case c.changedSig <- struct{}{}:
	default:
	}
}

func (c *connector) lists(kind subjects.Kind) bool {
	for _, k := range c.kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// notifier publishes a ListChanged event for every notification at once (consumers mark the
// list stale), then asks the loop to re-list after the debounce. A notification that comes
// while a ListChanged of this connector waits for its answer is held back (none stored for it),
// until an answer it did not give shows up (answered): seen live by the watch, or found on the
// stream once the NATS connection is back (recheck).
func (c *connector) notifier(ctx context.Context) {
	defer func() {
		c.pubMu.Lock()
		c.releaseAll()
		c.pubMu.Unlock()
	}()
	var back chan nats.Status // the connection is back: the watches missed what came meanwhile
	if c.m.nc != nil {
		back = c.m.nc.StatusChanged(nats.CONNECTED)
		defer c.m.nc.RemoveStatusListener(back)
	}
	recheck := false
	var retry <-chan time.Time // a recheck that could not read the stream is tried again
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changedSig:
		case <-back:
			recheck = true
		case <-retry:
		}
		c.mu.Lock()
		var kinds []subjects.Kind
		gens := map[subjects.Kind]uint64{}
		for _, k := range c.kinds {
			if c.changed[k] {
				kinds = append(kinds, k)
				gens[k] = c.gen[k]
			}
		}
		clear(c.changed)
		c.mu.Unlock()
		// Answers first: a notification handled in this round must not be held back for a
		// ListChanged that an answer seen live (not stored yet) lifted.
		checked := true
		for _, k := range c.kinds {
			c.pubMu.Lock()
			if recheck && !c.recheck(ctx, k) {
				checked = false
			}
			err := c.answered(ctx, k)
			c.pubMu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.log.Error().Err(err).Str("kind", string(k)).Msg("cannot publish list_changed after another connector's answer")
			}
		}
		recheck = recheck && !checked
		retry = nil
		if recheck {
			retry = time.After(time.Second)
		}
		for _, k := range kinds {
			c.pubMu.Lock()
			var err error
			stored := false
			st := c.kind(k)
			if !st.needsConfirm() || !c.stillWaits(ctx, k, st.changedSeq) {
				err = c.publishChanged(ctx, k)
				stored = err == nil
			}
			if !stored {
				c.holdBack(k, gens[k], st.changedSeq)
			}
			c.pubMu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.log.Error().Err(err).Str("kind", string(k)).Msg("cannot publish list_changed")
			} else {
				c.log.Debug().Str("kind", string(k)).Bool("stored", stored).Msg("list_changed")
			}
		}
		if len(kinds) > 0 {
			c.requestRelist(kinds)
		}
		if hook := c.m.afterNotified.Load(); hook != nil {
			for _, k := range kinds {
				(*hook)(c.sc.Name, k)
			}
		}
	}
}

// changedWaits reports whether the stream shows the ListChanged at changedSeq still waiting:
// no snapshot nor Confirmed of kind stored after it. Only then are consumers surely stale for
// it, and a further notification need not be stored: another connector of the server (or one
// before a restart) may have answered it, and this one's record of the answers is not the
// stream's. A read that fails says no (the ListChanged is published). Unlike the other reads of
// the stream, these have publishTimeout in all, the wait for their turns included: the read
// only spares a ListChanged, and the notifier holds pubMu meanwhile; a notification that came
// after another connector's answer waiting behind the reads of hundreds of servers would leave
// consumers holding a changed list fresh for as long.
func (c *connector) changedWaits(ctx context.Context, kind subjects.Kind, changedSeq uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	for _, subject := range []string{subjects.RegistrySnapshot(c.sc.Name, kind), subjects.RegistryConfirmed(c.sc.Name, kind)} {
		msg, err := c.m.lastMsg(ctx, subject)
		if err != nil || msg != nil && msg.Sequence > changedSeq {
			return false
		}
	}
	return true
}

// stillWaits reports whether the ListChanged at changedSeq, which the connector stored, still
// waits for its answer (changedWaits); the caller holds pubMu. It watches the kind first, and
// reads the stream once per ListChanged that waits, not at every notification: once a read made
// while the watch was up found it waiting, an answer stored since reaches the watch (or, while
// the connection was down, the notifier's recheck), which makes the notifier store a ListChanged
// (answered). A server flooding list_changed otherwise made its notifier send 2 JetStream API
// requests per round, as fast as NATS answered, for as long as it flooded.
func (c *connector) stillWaits(ctx context.Context, kind subjects.Kind, changedSeq uint64) bool {
	h := c.watch(kind, changedSeq) // before the stream is read: an answer after the read is seen
	if h.waiting == changedSeq && h.watching() && !h.seen.Load() {
		return true
	}
	if !c.changedWaits(ctx, kind, changedSeq) {
		return false
	}
	if h.watching() {
		h.waiting = changedSeq
	}
	return true
}

// requestRelist schedules a debounced re-list of kinds (nil: every kind).
func (c *connector) requestRelist(kinds []subjects.Kind) {
	if kinds == nil {
		kinds = c.kinds
	}
	now := time.Now()
	c.mu.Lock()
	for _, k := range kinds {
		p, ok := c.pending[k]
		if !ok {
			p.first = now
		}
		p.last = now
		c.pending[k] = p
	}
	c.mu.Unlock()
	select {
	case c.relistSig <- struct{}{}:
	default:
	}
}

// relistDelay is how long after a kind's first notification it is re-listed at the earliest:
// d (the debounce), doubled for every re-list in a row past spuriousFree that found the list
// unchanged after a list_changed, up to maxDebounceFactor d or limit (BackoffMax), whichever
// is less (never less than d): the kind's list is stale (its tools refused) from the
// notification until the re-list, and a spurious one costs the stream only two small events.
func relistDelay(spurious int, d, limit time.Duration) time.Duration {
	limit = min(limit, maxDebounceFactor*d)
	delay := d
	for i := spuriousFree; i <= spurious && delay < limit; i++ {
		delay *= 2
	}
	return max(min(delay, limit), d)
}

// dueLocked is when kind's pending re-list should run: d after its last notification, but no
// later than maxDebounceFactor d after its first, nor earlier than relistDelay after it.
func (c *connector) dueLocked(kind subjects.Kind, p pendingRelist, d, limit time.Duration) time.Time {
	due := p.last.Add(d)
	if latest := p.first.Add(maxDebounceFactor * d); due.After(latest) {
		due = latest
	}
	if least := p.first.Add(relistDelay(c.spurious[kind], d, limit)); least.After(due) {
		due = least
	}
	return due
}

// pendingDue is when the next pending re-list should run (see dueLocked); d is the debounce,
// limit the longest relistDelay.
func (c *connector) pendingDue(d, limit time.Duration) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for k, p := range c.pending {
		if due := c.dueLocked(k, p, d, limit); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next, !next.IsZero()
}

// takePending returns the pending kinds due at now and forgets them.
func (c *connector) takePending(now time.Time, d, limit time.Duration) []subjects.Kind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var kinds []subjects.Kind
	for _, k := range c.kinds {
		if p, ok := c.pending[k]; ok && !c.dueLocked(k, p, d, limit).After(now) {
			kinds = append(kinds, k)
			delete(c.pending, k)
		}
	}
	return kinds
}

// relistNow asks the loop to re-list kinds and waits for the answer.
func (c *connector) relistNow(ctx context.Context, kinds []subjects.Kind) subjects.RelistReply {
	unavailable := func(msg string) subjects.RelistReply {
		st := c.current()
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
			Code: subjects.CodeUnavailable, Message: msg, Reason: st.Reason}}
	}
	c.mu.Lock()
	s, end := c.sess, c.sessEnd
	c.mu.Unlock()
	switch {
	case s == nil && end != nil: // lost, and the status does not say so yet (still ready, say)
		return c.endedReply(end.err)
	case s == nil:
		return unavailable("server " + c.sc.Name + " is not connected (" + c.current().Status + ")")
	}
	if c.relistWaiting.Add(1) > maxRelistWaiting {
		c.relistWaiting.Add(-1)
		return unavailable(fmt.Sprintf("%d re-lists of server %s wait already (the most that may); try again", maxRelistWaiting, c.sc.Name))
	}
	defer c.relistWaiting.Add(-1)
	req := &relistReq{kinds: kinds, reply: make(chan subjects.RelistReply, 1)}
	select {
	case c.requests <- req:
	case <-end.done:
		return c.endedReply(end.err)
	case <-ctx.Done():
		return unavailable("the connector is busy; try again")
	case <-c.done:
		return unavailable("server " + c.sc.Name + " is stopping")
	}
	select {
	case r := <-req.reply:
		return r
	case <-end.done:
		select {
		case r := <-req.reply: // answered before the serving ended
			return r
		default: // (the loop panicked while it re-listed)
			return c.endedReply(end.err)
		}
	case <-ctx.Done():
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
			Code: subjects.CodeTimeout, Message: "re-list did not finish in time"}}
	}
}

// endedReply answers a re-list the loop did not answer before it stopped serving its session,
// err why: unavailable at once, rather than at the re-list's deadline (the executor's call
// would wait its RelistTimeout for the same answer).
func (c *connector) endedReply(err error) subjects.RelistReply {
	msg := "connection to server " + c.sc.Name + " lost before the re-list ran; reconnecting"
	if errors.Is(err, context.Canceled) {
		msg = "server " + c.sc.Name + " is stopping"
	}
	return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
		Code: subjects.CodeUnavailable, Message: msg, Reason: quote(c.red, err.Error(), 1000)}}
}

// relistReply builds the answer to a re-list: one kind's fingerprint, or for several kinds a
// SHA-256 over "kind=fingerprint" lines; Sequence is the highest sequence of a snapshot stored
// by this re-list (0: nothing changed).
func (c *connector) relistReply(kinds []subjects.Kind, out map[subjects.Kind]kindOutcome) subjects.RelistReply {
	r := subjects.RelistReply{V: subjects.Version, ListedAt: time.Now().UTC()}
	h := sha256.New()
	for _, k := range kinds {
		o := out[k]
		if o.err != nil {
			var coded *codedError
			code := subjects.CodeListFailed
			if errors.As(o.err, &coded) {
				code = coded.code
			}
			msg := "re-listing " + string(k) + " failed"
			waitMs := retryAfterOf(o.err).Milliseconds() // the server's Retry-After (left), if it sent one
			if o.held {
				waitMs = max(waitMs, 1) // never 0: it is a wait
				msg = fmt.Sprintf("%s not re-listed: the server asked not to be asked again for %s (HTTP 429 or 503 Retry-After)",
					k, time.Duration(waitMs)*time.Millisecond)
			}
			return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
				Code: subjects.CodeUnavailable, Message: msg, RetryAfterMs: waitMs,
				Reason: quote(c.red, code+": "+o.err.Error(), 1000)}}
		}
		if o.published && o.seq > r.Sequence {
			r.Sequence = o.seq
		}
		fmt.Fprintf(h, "%s=%s\n", k, o.fp)
		if len(kinds) == 1 {
			r.Fingerprint = o.fp
		}
	}
	if len(kinds) != 1 {
		r.Fingerprint = hex.EncodeToString(h.Sum(nil))
	}
	return r
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
