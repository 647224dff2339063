package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// Client identity sent to servers.
const (
	clientName    = "mcpstream-registrysync"
	clientVersion = "1.0.0"
)

// ackWait bounds the wait for notifications/subscriptions/acknowledged after opening a
// subscriptions/listen stream, before the first list.
const ackWait = 5 * time.Second

var (
	// errNeedListening is returned by openSession when a streamable HTTP server turned out to
	// be legacy: its notifications need a transport with continuous listening.
	errNeedListening = errors.New("legacy streamable HTTP needs continuous listening")
	// errSessionClosed is the loss reason of a session closed on purpose.
	errSessionClosed = errors.New("session closed")
)

// newHTTPClient returns a client with its own connection pool, so that closing a session
// closes its connections only. Requests are bounded by their contexts and go to the origin of
// the configured URL only, responses are bounded by limit (see cappedTransport) and their
// headers by maxResponseHeaderBytes, redirects by sameOriginRedirect.
func newHTTPClient(limit int, configured string) (*http.Client, error) {
	u, err := url.Parse(configured)
	if err != nil {
		return nil, fmt.Errorf("%w: server URL: %v", ErrInvalidConfig, err)
	}
	next := http.DefaultTransport
	if t, ok := next.(*http.Transport); ok {
		t = t.Clone()
		t.MaxResponseHeaderBytes = maxResponseHeaderBytes
		next = t
	}
	return &http.Client{
		Transport:     &cappedTransport{next: next, limit: int64(limit), origin: origin(u), host: u.Host},
		CheckRedirect: sameOriginRedirect,
	}, nil
}

// maxResponseHeaderBytes bounds the headers of a server's HTTP response, as cappedTransport
// bounds its body: Go's client default, 10 MiB, let a hostile server have ~40 MiB allocated for
// each response (each call in flight) with headers of no use to anyone. It is what Go's server
// takes of a request's headers, more than any proxy in front of a real server passes on.
const maxResponseHeaderBytes = http.DefaultMaxHeaderBytes

// maxRedirects is as many redirects as Go's client follows by default.
const maxRedirects = 10

// sameOriginRedirect follows a redirect only within the origin (scheme, host and port) of the
// configured URL. Every request carries ServerConfig.Headers, and Go's client copies them onto
// a redirected request: custom headers (an API key) to any host, Authorization to any port of
// the same host name. A redirect elsewhere would hand the server's credentials to whoever the
// response names. cappedTransport refuses such a redirect first, with an error that does not
// quote the Location (see redirectElsewhere): this is the bound on their number, and a second
// line.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if from, to := origin(via[0].URL), origin(req.URL); from != to {
		return fmt.Errorf("refused a redirect from %s to another origin, %s: the server's credentials would go with it", from, to)
	}
	return nil
}

// origin is u's scheme://host:port, the port made explicit (no path, query or user info).
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// responseRoom is what an HTTP response may hold besides the largest list or result an event
// takes (the JSON-RPC envelope, SSE framing).
const responseRoom = 1 << 20

// lostError marks a failure of the connection itself: the session is closed and reconnected.
type lostError struct{ err error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// malformedError is the cause a list request or the handshake is cancelled with when a stdio
// server wrote a line that is not JSON (or a batch that was refused).
type malformedError struct {
	sample string
}

func (e *malformedError) Error() string {
	return "server wrote a line that is not JSON: " + e.sample
}

// session is one live MCP connection of a connector.
type session struct {
	c        *connector
	cl       *client.Client
	child    *child     // stdio only
	stdio    *stdioWrap // stdio only: the transport fastCall writes to
	fastID   atomic.Uint64
	hc       *http.Client
	protocol string
	proto    atomic.Pointer[string] // protocol, for goroutines that start before it is known
	info     mcp.Implementation
	caps     mcp.ServerCapabilities

	// forgetChild drops child from the Manager's children (KillChildren) once it is stopped
	// (stdio only).
	forgetChild func()

	ctx    context.Context // lives until close
	cancel context.CancelFunc
	// endStream ends a legacy HTTP+SSE session's event stream (SSE only): its context is not
	// ctx once started, so that close can cancel the session's subscriptions/listen while the
	// stream, which is the session on the server, is still open (see close).
	endStream context.CancelFunc

	// lctx is cancelled when the session is lost or closed; lostErr says why (set first).
	lctx     context.Context
	lcancel  context.CancelFunc
	lost     <-chan struct{}
	lostOnce sync.Once
	lostErr  error

	mu            sync.Mutex
	closing       bool // no new calls
	malformedSeen bool
	listCancels   map[uint64]context.CancelCauseFunc // requests noteMalformed cancels
	nextID        uint64

	// The re-lists of a reopened legacy GET stream (listenReopened): when the last ran, the
	// wait before the next, and the one waiting for it.
	reopenLast  time.Time
	reopenWait  time.Duration
	reopenTimer *time.Timer

	ack        chan struct{}
	listenDone chan struct{}
	// listenCap is the slot of the subscriptions/listen request last sent (under mu): the id a
	// session over legacy HTTP+SSE cancels when it closes (see close).
	listenCap *capture
	calls     sync.WaitGroup
	closeOnce sync.Once
}

// sseNoResponseTimeout is the SSE transport's response timeout: in effect none (see openSession).
const sseNoResponseTimeout = time.Duration(math.MaxInt64)

// openSession connects, negotiates the protocol and, on 2026-07-28, opens the
// subscriptions/listen stream. listening asks for a legacy streamable HTTP transport with the
// standalone GET stream.
func openSession(ctx context.Context, c *connector, listening bool) (*session, error) {
	sc, cfg := c.sc, c.m.cfg
	sctx, cancel := context.WithCancel(context.Background())
	lctx, lcancel := context.WithCancel(context.Background())
	s := &session{
		c: c, ctx: sctx, cancel: cancel,
		lctx: lctx, lcancel: lcancel, lost: lctx.Done(),
		listCancels: map[uint64]context.CancelCauseFunc{},
		ack:         make(chan struct{}, 1),
		listenDone:  make(chan struct{}),
	}
	close(s.listenDone) // replaced when a listen loop starts

	var tr transport.Interface
	slogger := newSlog(c.log, c.red)
	switch sc.Transport {
	case TransportStdio:
		ch, err := startChild(sc, c.red, c.log, c.m.lineBytes, c.m.payloadLimit()+responseRoom, s.noteMalformed)
		if err != nil {
			cancel()
			return nil, err
		}
		s.child = ch
		s.forgetChild = c.m.trackChild(ch)
		onBroken := func(err error) { s.markLost(err) }
		ch.in.onBroken.Store(&onBroken)
		st := transport.NewIO(ch.fwdR, ch.in, nil)
		s.stdio = &stdioWrap{base: base{inner: st}, stdio: st}
		tr = s.stdio
		go func() {
			select {
			case <-ch.exited:
				s.markLost(errors.New("process exited")) // childLoss says how
			case <-ch.readerDone:
				// Nothing can be answered any more, though the process may run on: the
				// session ends, and close stops the process (childLoss says how it ended,
				// if it did: a crash shows first as a closed stdout).
				s.markLost(errors.New("the server closed its stdout"))
			case <-sctx.Done():
			}
		}()
	case TransportHTTP:
		hc, err := newHTTPClient(c.m.payloadLimit()+responseRoom, sc.URL)
		if err != nil {
			cancel()
			return nil, err
		}
		s.hc = hc
		// Requests the server sends on an event stream are answered by the connector, as over
		// legacy SSE (see answerServerRequest): mcp-go answered each on a goroutine of its own.
		s.hc.Transport.(*cappedTransport).serverRequests = s.answerServerRequest
		s.hc.Transport.(*cappedTransport).discarded = s.noteDiscarded
		opts := []transport.StreamableHTTPCOption{
			transport.WithHTTPHeaders(sc.Headers),
			transport.WithHTTPBasicClient(s.hc),
			transport.WithHTTPLogger(slogger),
		}
		if listening {
			opts = append(opts, transport.WithContinuousListening())
			// Notifications sent while the GET stream was down (before it first opened, or
			// between mcp-go's reconnections) are lost: re-list everything whenever it opens,
			// as when a 2026-07-28 subscriptions/listen stream is reopened. The debounce merges
			// it with the initial list; an unchanged list publishes nothing.
			s.hc.Transport.(*cappedTransport).listenOpened = s.listenReopened
		}
		h, err := transport.NewStreamableHTTP(sc.URL, opts...)
		if err != nil {
			cancel()
			return nil, err
		}
		tr = &httpWrap{base: base{inner: h}, http: h}
	case TransportSSE:
		hc, err := newHTTPClient(c.m.payloadLimit()+responseRoom, sc.URL)
		if err != nil {
			cancel()
			return nil, err
		}
		s.hc = hc
		s.hc.Transport.(*cappedTransport).serverRequests = s.answerServerRequest
		s.hc.Transport.(*cappedTransport).discarded = s.noteDiscarded
		s.hc.Transport.(*cappedTransport).legacySSE = true
		h, err := transport.NewSSE(sc.URL,
			transport.WithHeaders(sc.Headers),
			transport.WithHTTPClient(s.hc),
			transport.WithSSELogger(slogger),
			// Longer than ConnectTimeout, whose own timer (startTimer) ends the wait for the
			// endpoint event and says why: mcp-go's, started after the GET's answer, would
			// otherwise fire about as soon, and win on a loaded machine with its own words.
			transport.WithEndpointTimeout(2*cfg.ConnectTimeout),
			// No transport-wide response timeout (mcp-go's default is 60 s): every request
			// carries its own deadline (connect, list, call, ping), and subscriptions/listen
			// stays open for the life of the session; with the default it timed out after a
			// minute and the server flapped to unavailable and back.
			transport.WithResponseTimeout(sseNoResponseTimeout),
		)
		if err != nil {
			cancel()
			return nil, err
		}
		tr = &sseWrap{base: base{inner: h}, sse: h}
	default:
		cancel()
		return nil, fmt.Errorf("%w: unknown transport %q", ErrInvalidConfig, sc.Transport)
	}

	probe := discoverTimeout(cfg.ConnectTimeout)
	if mcp.IsModernProtocol(sc.ProtocolVersion) {
		// Pinned to 2026-07-28, initialize is never sent (pinnedRefusal): the half of
		// ConnectTimeout kept for it would only fail a server slow to start (each attempt
		// starting its process anew), which the whole of it lets answer server/discover.
		probe = cfg.ConnectTimeout
	}
	opts := []client.ClientOption{client.WithDiscoverTimeout(probe)}
	pinned := sc.ProtocolVersion
	if pinned == "" && listening {
		pinned = c.legacyHTTP
	}
	if pinned != "" {
		opts = append(opts, client.WithProtocolVersion(pinned))
	}
	s.cl = client.NewClient(tr, opts...)
	s.cl.OnNotification(s.onNotification)
	s.cl.OnConnectionLost(func(err error) {
		s.markLost(fmt.Errorf("connection lost: %w", err))
	})

	fail := func(err error) (*session, error) {
		err = s.childLoss(err)
		s.close(0)
		return nil, err
	}
	// Start's context is the life of the connection (SSE stream, GET stream, stdio handlers).
	// Start (the SSE GET, say) must not outlive ConnectTimeout nor the connector.
	startTimer := time.AfterFunc(cfg.ConnectTimeout, cancel)
	stopStart := context.AfterFunc(ctx, cancel)
	// A legacy SSE stream lost meanwhile ends Start too: mcp-go's SSE transport reports a
	// stream that ended (before its endpoint event, say) to the connection-lost handler only,
	// and Start waited on for the endpoint until ConnectTimeout. (Ending Start ends the stream,
	// which is reported lost too: only a loss that came first tells why Start failed.)
	var lostFirst atomic.Bool
	stopLost := func() bool { return false }
	if sc.Transport == TransportSSE {
		stopLost = context.AfterFunc(s.lctx, func() {
			lostFirst.Store(sctx.Err() == nil)
			cancel()
		})
	}
	// The slot tells the HTTP status and Retry-After of a legacy SSE server's opening GET
	// (cappedTransport): a 429 or 503 says when to come back.
	scp := &capture{}
	startCtx := sctx
	stopStream := func() bool { return false }
	if sc.Transport == TransportSSE {
		// The event stream outlives ctx (until the client's Close): an SSE server forgets a
		// session whose stream ended, and the notifications/cancelled close sends for its
		// subscriptions/listen would come too late. Until Start returns, ctx ends it as before.
		var streamCtx context.Context
		streamCtx, s.endStream = context.WithCancel(context.Background())
		stopStream = context.AfterFunc(sctx, s.endStream)
		startCtx = streamCtx
	}
	err := s.cl.Start(context.WithValue(startCtx, openKey{}, scp))
	timedOut := !startTimer.Stop()
	stopStart()
	stopStream()
	stopLost()
	switch {
	case (err != nil || sctx.Err() != nil) && ctx.Err() == nil && lostFirst.Load():
		err = s.startLost()
	case (err == nil || timedOut && (errors.Is(err, context.Canceled) || strings.HasPrefix(err.Error(), "timeout waiting for endpoint"))) &&
		sctx.Err() != nil && ctx.Err() == nil:
		// (mcp-go's SSE transport says its context was cancelled, or, its own endpoint timer
		// firing together with ours, that it timed out: the timeout is why.)
		err = s.startTimedOut(scp, cfg.ConnectTimeout)
	case err == nil && sctx.Err() != nil:
		err = ctx.Err()
	}
	if err != nil {
		return fail(withRetryAfter(fmt.Errorf("start: %w", err), scp, time.Now()))
	}
	// A stdout line that is not JSON cancels the handshake as it does a list (noteMalformed):
	// the answer it held is lost, and waiting for it would last ConnectTimeout.
	ictx, icancel := context.WithCancelCause(ctx)
	defer icancel(nil)
	defer s.cancelOnMalformed(icancel)()
	ictx, tcancel := context.WithTimeout(ictx, cfg.ConnectTimeout)
	defer tcancel()
	stop := context.AfterFunc(s.lctx, tcancel) // a child that dies ends the handshake at once
	defer stop()
	// The slot tells the HTTP status of a handshake the server refuses (handshakeRefused), and
	// which handshake request went unanswered: mcp-go sends server/discover, then initialize if
	// the server is not a 2026-07-28 one, and sends nothing once ictx ends (handshakeTimeout).
	ictx, hcp := withCapture(ictx)
	hcp.pin, hcp.discoverBound = sc.ProtocolVersion, probe
	res, err := s.cl.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: pinned,
		ClientInfo:      mcp.Implementation{Name: clientName, Version: clientVersion},
	}})
	if err != nil {
		// A handshake a server refuses 429 or 503 says when to come back (the loop waits at
		// least that long before connecting again).
		fail := func(err error) (*session, error) { return fail(withRetryAfter(err, hcp, time.Now())) }
		var mal *malformedError
		var pinErr *pinnedError
		switch {
		case s.isLost():
			return fail(s.lostErr)
		case errors.As(context.Cause(ictx), &mal):
			return fail(codedf(subjects.CodeMalformedResponse, "initialize: %s", mal.Error()))
		case errors.Is(err, errResponseTooLarge) || errors.Is(err, errBadBatch) || errors.Is(err, errMalformedAnswer) ||
			errors.As(err, new(*brokenAnswerError)):
			return fail(codedf(subjects.CodeMalformedResponse, "initialize: %v", innerError(err)))
		case errors.Is(err, transport.ErrLegacySSEServer):
			if st, ra := hcp.httpStatus(); st != 0 {
				return fail(handshakeRefused(st, ra, time.Now()))
			}
		case errors.Is(ictx.Err(), context.DeadlineExceeded):
			return fail(s.handshakeTimeout(hcp.lastMethod(), cfg.ConnectTimeout))
		case errors.As(err, &pinErr):
			return fail(pinErr) // the pin's own words, whatever mcp-go wrapped them in
		}
		return fail(fmt.Errorf("initialize: %w", err))
	}
	s.protocol = s.cl.ProtocolVersion()
	if s.protocol == "" {
		s.protocol = res.ProtocolVersion
	}
	if err := pinMismatch(sc.ProtocolVersion, s.protocol); err != nil {
		return fail(err)
	}
	s.proto.Store(&s.protocol)
	s.info = res.ServerInfo
	s.caps = s.cl.GetServerCapabilities()
	modern := mcp.IsModernProtocol(s.protocol)

	if sc.Transport == TransportHTTP && !modern && !listening {
		c.legacyHTTP = s.protocol
		c.legacyPassing = hcp.discoverFailedPassing()
		s.close(0)
		return nil, errNeedListening
	}
	if modern {
		if f := s.listenFilter(); !f.IsEmpty() {
			s.startListening(f)
			t := time.NewTimer(ackWait)
			select {
			case <-s.ack:
			case <-s.listenDone:
			case <-s.lost:
			case <-t.C:
				c.log.Debug().Msg("no subscriptions/acknowledged yet; listing anyway")
			}
			t.Stop()
		}
	}
	if s.isLost() {
		return fail(s.lostErr)
	}
	return s, nil
}

// startLost is the failure of a Start the session's loss ended: for a legacy SSE server whose
// event stream ended before its endpoint event (which names where messages go), that it did;
// for one whose endpoint event was refused, why.
func (s *session) startLost() error {
	if ee := new(endpointError); errors.As(s.lostErr, &ee) {
		return ee // (it was not lost: the endpoint event was refused)
	}
	if w, ok := s.cl.GetTransport().(*sseWrap); ok && w.sse.GetEndpoint() == nil {
		return fmt.Errorf("the server's event stream ended before its endpoint event (the URL to send messages to): %w", s.lostErr)
	}
	return s.lostErr
}

// startTimedOut is the failure of a Start that ConnectTimeout (d) ended: for a legacy SSE
// server whose event stream was opened, that no endpoint event came on it.
func (s *session) startTimedOut(scp *capture, d time.Duration) error {
	w, ok := s.cl.GetTransport().(*sseWrap)
	if st, _ := scp.httpStatus(); ok && st == http.StatusOK && w.sse.GetEndpoint() == nil {
		return fmt.Errorf("the server's event stream sent no endpoint event (the URL to send messages to) within %s", d)
	}
	return fmt.Errorf("no answer within %s", d)
}

// mcpDiscoverTimeout is mcp-go's own bound on its server/discover probe (its default).
const mcpDiscoverTimeout = 5 * time.Second

// discoverTimeout bounds mcp-go's server/discover probe, after which it falls back to
// initialize for the life of the Client: half of connect, the handshake's bound, so that a
// legacy server that ignores the method keeps the other half for initialize; never less than
// mcp-go's 5 s. With its 5 s, a server slow to start (npx fetching its package, a JVM, a loaded
// host) answered server/discover too late and was spoken to at 2025-11-25 for as long as the
// connection lasted (a stdio server's process: no cache hints, no subscriptions/listen).
//
// It applies to every transport. A legacy HTTP or SSE server answers server/discover at once
// with an error or an HTTP 4xx, which the bound does not delay; one that leaves it unanswered
// connects later but still within connect; and a 2026-07-28 server slow under load is not
// downgraded for the connection. The floor keeps a short ConnectTimeout from shortening the
// probe: a 2026-07-28 server downgraded is silent and lasts, a legacy server that ignores
// server/discover and cannot connect within a short ConnectTimeout fails loudly (the status
// says server/discover went unanswered; ProtocolVersion "2025-11-25" connects it at once).
// Pinned to 2026-07-28, the probe has the whole of connect (openSession).
func discoverTimeout(connect time.Duration) time.Duration {
	return max(connect/2, mcpDiscoverTimeout)
}

// handshakeRefused is the failure of an initialize POST the server answered with status, a 4xx
// other than 401, in place of mcp-go's "server returned 4xx for initialize POST, likely a legacy
// SSE server", which lost the status: a 403 (a credential the server or a gateway does not
// take) or a 429 (load shed, with its Retry-After) sent the operator after the wrong fix. Only
// a 400, 404 or 405, which the URL of a legacy HTTP+SSE server may answer a POST with, suggests
// that transport.
func handshakeRefused(status int, retryAfter string, now time.Time) error {
	msg := fmt.Sprintf("initialize: the server refused the handshake with HTTP %d (%s)", status, http.StatusText(status))
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		msg += ": check the URL (a legacy HTTP+SSE server's takes transport: sse)"
	}
	if ms := retryAfterMs(retryAfter, now); ms > 0 {
		msg += fmt.Sprintf("; Retry-After %s", time.Duration(ms)*time.Millisecond)
	}
	return errors.New(msg)
}

// Re-lists for a reopened legacy GET stream are spaced from reopenWaitMin, doubling up to
// reopenWaitMax while the stream keeps ending, back to none once it stayed up for a while.
const (
	reopenWaitMin = time.Second
	reopenWaitMax = 30 * time.Second
)

// listenReopened re-lists every kind when the legacy GET stream (re)opens: notifications sent
// while it was down are lost. mcp-go reopens a stream that ended every second: one that keeps
// ending at once (a proxy's short idle timeout, a server that answers GET with an empty stream)
// must not have every kind listed every second, so re-lists back off, each coming at most
// reopenWait after the previous (a reopening meanwhile is covered by the one scheduled).
func (s *session) listenReopened() {
	if s.isLost() {
		return
	}
	s.mu.Lock()
	if s.reopenTimer != nil || s.closing {
		s.mu.Unlock()
		return // a re-list is already due
	}
	now := time.Now()
	if now.Sub(s.reopenLast) > 2*reopenWaitMax {
		s.reopenWait = 0 // the stream stayed up: at once
	}
	if d := s.reopenLast.Add(s.reopenWait).Sub(now); d > 0 {
		s.reopenTimer = time.AfterFunc(d, s.reopenRelist)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.reopenRelist()
}

// reopenRelist runs the re-list listenReopened decided, and lengthens the wait before the next.
func (s *session) reopenRelist() {
	s.mu.Lock()
	s.reopenTimer = nil
	s.reopenLast = time.Now()
	s.reopenWait = min(max(2*s.reopenWait, reopenWaitMin), reopenWaitMax)
	s.mu.Unlock()
	if !s.isLost() {
		s.c.requestRelist(nil)
	}
}

// declares reports whether the server's capabilities declare kind, and listChanged for it.
func (s *session) declares(kind subjects.Kind) (has, listChanged bool) {
	switch kind {
	case subjects.KindTools:
		if s.caps.Tools != nil {
			return true, s.caps.Tools.ListChanged
		}
	case subjects.KindPrompts:
		if s.caps.Prompts != nil {
			return true, s.caps.Prompts.ListChanged
		}
	case subjects.KindResources:
		if s.caps.Resources != nil {
			return true, s.caps.Resources.ListChanged
		}
	}
	return false, false
}

// listenFilter opts in to list_changed of every listed kind the server can notify about.
func (s *session) listenFilter() mcp.SubscriptionFilter {
	var f mcp.SubscriptionFilter
	for _, k := range s.c.kinds {
		has, lc := s.declares(k)
		if !has || !lc {
			continue
		}
		switch k {
		case subjects.KindTools:
			f.ToolsListChanged = true
		case subjects.KindPrompts:
			f.PromptsListChanged = true
		case subjects.KindResources:
			f.ResourcesListChanged = true
		}
	}
	return f
}

// startListening keeps a subscriptions/listen stream open for the life of the session. When the
// server ends the stream, notifications may have been missed, so every kind is re-listed before
// listening again. A server that refuses the request (a JSON-RPC error) is not asked again: the
// periodic resync covers it. A transport failure loses the session.
func (s *session) startListening(f mcp.SubscriptionFilter) {
	s.listenDone = make(chan struct{})
	go func() {
		defer close(s.listenDone)
		defer s.c.recoverPanic("listen")
		wait := time.Second
		for {
			ctx, cp := withCapture(s.ctx)
			s.mu.Lock()
			s.listenCap = cp
			s.mu.Unlock()
			err := s.cl.Listen(ctx, f)
			if s.ctx.Err() != nil {
				return
			}
			_, _, rpcErr, _ := cp.snapshot()
			switch {
			case rpcErr != nil:
				s.c.log.Warn().Int("code", rpcErr.Code).Str("message", truncate(s.c.red.String(truncate(rpcErr.Message, serverErrorReadBytes)), maxServerErrorBytes)).
					Msg("server refused subscriptions/listen; relying on periodic resync")
				return
			case err != nil:
				s.markLost(fmt.Errorf("subscriptions/listen: %w", err))
				return
			}
			s.c.requestRelist(nil)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, 30*time.Second)
		}
	}()
}

func (s *session) onNotification(n mcp.JSONRPCNotification) {
	defer s.c.recoverPanic("notification handler")
	if s.ctx.Err() != nil {
		return // closed: an SSE stream open a moment longer (see endStream) changes nothing
	}
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		s.c.noteChanged(subjects.KindTools)
	case string(mcp.MethodNotificationPromptsListChanged):
		s.c.noteChanged(subjects.KindPrompts)
	case string(mcp.MethodNotificationResourcesListChanged):
		s.c.noteChanged(subjects.KindResources)
	case mcp.MethodNotificationSubscriptionsAcknowledged:
		select {
		case s.ack <- struct{}{}:
		default:
		}
	}
}

// noteMalformed cancels the handshake and the list requests in flight when a stdio server wrote
// a line that is not JSON: their answer may be the line, and it will never be matched. A line
// too long to take (tooLong) cancels nothing: the child's reader failed the request it answers
// if its id could be read (child.tooLarge), and anything else it was is dropped.
func (s *session) noteMalformed(sample string, tooLong bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.c.log.Debug()
	if !s.malformedSeen {
		s.malformedSeen = true
		ev = s.c.log.Warn()
	}
	ev.Str("sample", sample).Bool("tooLong", tooLong).Msg("server sent a message that is not JSON, or too long, or a batch refused")
	if tooLong {
		return
	}
	cause := &malformedError{sample: sample}
	for _, cancel := range s.listCancels {
		cancel(cause)
	}
}

// noteDiscarded logs an event of an HTTP or SSE server discarded as too large, or a batch
// refused (see sseRequests), as noteMalformed logs a stdio line too long: nothing is cancelled
// (the request it answers, when known, failed already). what is redacted: it may quote the id
// of an answer, which on a legacy SSE stream is any the server chose.
func (s *session) noteDiscarded(what string) { s.noteMalformed(s.c.red.String(what), true) }

// cancelOnMalformed has noteMalformed cancel a request in flight, until the function it returns
// is called.
func (s *session) cancelOnMalformed(cancel context.CancelCauseFunc) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	s.listCancels[id] = cancel
	return func() {
		s.mu.Lock()
		delete(s.listCancels, id)
		s.mu.Unlock()
	}
}

func (s *session) markLost(err error) {
	s.lostOnce.Do(func() {
		s.lostErr = s.childLoss(err)
		s.lcancel()
	})
}

// childLoss is why a stdio session failed: how the child ended if it did within exitWait, or
// else err with the last stderr lines that tell, as a *stderrError that also holds the child's
// last stderr lines for the connector's warning. A crash shows first as a broken stdin or a
// closed stdout, which say nothing of the cause; the exit status and the last stderr lines do
// ("exit status 1 (stderr: API_KEY is not set)"), and a crash-looping server's status should
// say them; so do they of a server that runs on but does not answer ("the server did not
// answer initialize (the MCP handshake) within 20s; ... (stderr: Error: UPSTREAM_URL is not
// set)", see handshakeTimeout).
func (s *session) childLoss(err error) error {
	var se *stderrError
	if s.child == nil || errors.Is(err, errSessionClosed) || errors.As(err, &se) {
		return err
	}
	if waitChan(s.child.exited, exitWait) {
		return &stderrError{err: errors.New(s.child.exitReason()), recent: s.child.recentStderr()}
	}
	recent := s.child.recentStderr()
	if len(recent) == 0 {
		return err
	}
	return &stderrError{err: err, told: s.child.toldStderr(), recent: recent}
}

// handshakeTimeout is the failure of a handshake whose request method (server/discover or
// initialize) the server did not answer within timeout: mcp-go's "transport error: context
// deadline exceeded" said neither that the server never answered nor what to check. A stdio
// server's process still runs (one that ended fails the handshake at once, see childLoss):
// what it last wrote on stderr, if anything, is quoted.
func (s *session) handshakeTimeout(method string, timeout time.Duration) error {
	if method == "" {
		method = "initialize"
	}
	msg := fmt.Sprintf("the server did not answer %s (the MCP handshake) within %s", method, timeout)
	if pin := s.c.sc.ProtocolVersion; mcp.IsModernProtocol(pin) && method == string(mcp.MethodServerDiscover) {
		// The probe had the whole of timeout (openSession): nothing was left for initialize,
		// which a legacy server that ignores server/discover would have answered.
		msg = fmt.Sprintf("protocolVersion is pinned to %s but %s; initialize was not sent (it negotiates %s at most)",
			pin, msg, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	if s.child == nil {
		return errors.New(msg + ": check that its URL is its MCP endpoint and that the server is not overloaded")
	}
	msg += "; its process is running: check that the command starts an MCP server on stdin/stdout and that its arguments and environment are complete"
	recent := s.child.recentStderr()
	if len(recent) == 0 {
		return errors.New(msg + " (it wrote nothing on stderr)")
	}
	return &stderrError{err: errors.New(msg), told: s.child.toldStderr(), recent: recent}
}

func (s *session) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// stopCalls lets no more calls begin on the session, and returns a channel closed once the
// calls in flight are over.
func (s *session) stopCalls() <-chan struct{} {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	return done
}

// close ends the session: it waits up to drain for tools/call requests in flight, then closes
// the client and transport and stops a stdio child (and its process group).
func (s *session) close(drain time.Duration) {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		if s.reopenTimer != nil {
			s.reopenTimer.Stop()
			s.reopenTimer = nil
		}
		s.mu.Unlock()
		if drain > 0 {
			waitChan(s.stopCalls(), drain)
		}
		s.markLost(errSessionClosed)
		s.cancel()
		switch tr := s.cl.GetTransport().(type) {
		case *httpWrap:
			// mcp-go's Close ends a legacy streamable HTTP session with a DELETE and waits up
			// to 5 s (its own constant) for the answer: a hung server, the one a failed probe
			// closes the session of, held the connection_lost status, the reconnection, Remove
			// and a stopping Manager that long. The DELETE is a courtesy: it goes out on its
			// own (bounded by those 5 s), and its connection is closed once it is answered.
			go func() {
				_ = s.cl.Close()
				s.hc.CloseIdleConnections()
			}()
		case *sseWrap:
			// Over legacy HTTP+SSE a request has no stream of its own whose end would cancel
			// it, and mcp-go sends no notifications/cancelled on an HTTP transport: the
			// subscriptions/listen of a 2026-07-28 session was never cancelled, and a server
			// that does not end a session's requests when its event stream closes (mcp-go's
			// SSE server) held it, a goroutine, for good — one more per session closed.
			// Cancelled here, a courtesy like the DELETE above: on its own, bounded.
			// The event stream is still open (see endStream): the server knows the session
			// until the notification is handled, and the stream ends with the client's Close.
			s.mu.Lock()
			cp := s.listenCap
			s.mu.Unlock()
			go func() {
				defer s.endStream()
				if cp != nil {
					if sent, _, _, _ := cp.snapshot(); sent {
						ctx, cancel := context.WithTimeout(context.Background(), listenCancelTimeout)
						n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
							Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
								Params: mcp.NotificationParams{AdditionalFields: map[string]any{
									"requestId": cp.requestID(), "reason": "the client closed the session"}}}}
						// Sent again a moment later: an SSE server answers each POST 202 and
						// handles its message on a goroutine of its own (mcp-go's does), so a
						// cancellation may be handled before the listen request it names is
						// registered, and be ignored (a cancellation of an unknown request is).
						if tr.SendNotification(ctx, n) == nil {
							select {
							case <-time.After(listenCancelAgain):
								_ = tr.SendNotification(ctx, n)
							case <-ctx.Done():
							}
						}
						cancel()
					}
				}
				_ = s.cl.Close()
				s.hc.CloseIdleConnections()
			}()
		default:
			_ = s.cl.Close()
		}
		if s.child != nil {
			s.child.stop()
			s.forgetChild()
		}
		waitChan(s.listenDone, 5*time.Second)
		if s.hc != nil {
			s.hc.CloseIdleConnections()
		}
	})
}

// listenCancelTimeout bounds the notifications/cancelled of the subscriptions/listen request a
// session over legacy HTTP+SSE sends when it closes (see close).
const listenCancelTimeout = 5 * time.Second

// listenCancelAgain is how long after that notifications/cancelled it is sent once more (see
// close).
const listenCancelAgain = 250 * time.Millisecond

// listPage sends one list request and returns the raw result. Errors are *codedError (the
// server answered badly: the session is fine), *lostError, or another error for a transport
// failure whose meaning a probe decides; any of them wrapped in a *retryAfterError when the
// server answered the request HTTP 429 or 503 with a Retry-After.
func (s *session) listPage(ctx context.Context, kind subjects.Kind, cursor string) (raw []byte, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer s.cancelOnMalformed(cancel)()
	stop := context.AfterFunc(s.lctx, func() { cancel(errSessionClosed) })
	defer stop()

	cctx, cp := withCapture(ctx)
	cp.rawOnly = true // mcp-go decodes nothing (see capture.go); parsePage counts, then decodes
	// A 429 or 503 says when to list again (the retry backoff waits at least that long).
	defer func() { err = withRetryAfter(err, cp, time.Now()) }()
	params := mcp.PaginatedRequest{Params: mcp.PaginatedParams{Cursor: mcp.Cursor(cursor)}}
	switch kind {
	case subjects.KindTools:
		_, err = s.cl.ListToolsByPage(cctx, mcp.ListToolsRequest{PaginatedRequest: params})
	case subjects.KindPrompts:
		_, err = s.cl.ListPromptsByPage(cctx, mcp.ListPromptsRequest{PaginatedRequest: params})
	case subjects.KindResources:
		_, err = s.cl.ListResourcesByPage(cctx, mcp.ListResourcesRequest{PaginatedRequest: params})
	}
	_, result, rpcErr, terr := cp.snapshot()
	switch {
	case rpcErr != nil:
		return nil, codedf(subjects.CodeListFailed, "%s/list: %s", kind, rpcErrorText(rpcErr, s.c.red.String))
	case result != nil:
		// The raw bytes are what matter (mcp-go decoded none of them), and parsePage judges
		// them.
		return result, nil
	}
	if err == nil {
		err = terr
	}
	if err == nil {
		return nil, codedf(subjects.CodeMalformedResponse, "%s/list: empty result", kind)
	}
	var mal *malformedError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var broken *brokenAnswerError
	switch cause := context.Cause(ctx); {
	case errors.Is(err, errResponseTooLarge):
		// A page that no event could hold: a stdio line, an HTTP body or event over its bound.
		return nil, codedf(subjects.CodeSnapshotTooLarge, "%s/list: %v", kind, innerError(err))
	case errors.Is(err, errBadBatch):
		return nil, codedf(subjects.CodeMalformedResponse, "%s/list: %v", kind, errBadBatch)
	case errors.As(cause, &mal):
		return nil, codedf(subjects.CodeMalformedResponse, "%s/list: %s", kind, mal.Error())
	case s.isLost():
		return nil, &lostError{err: s.lostErr}
	case errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errAnotherID) ||
		errors.Is(err, errMalformedAnswer) || errors.As(err, &broken):
		// The server answered, but not with JSON (a cut body decodes to unexpected EOF), or
		// with the id of another request.
		return nil, codedf(subjects.CodeMalformedResponse, "%s/list: %v", kind, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded):
		return nil, codedf(subjects.CodeListFailed, "%s/list: no answer in time", kind)
	case ctx.Err() != nil && cause == context.Canceled:
		return nil, err
	}
	return nil, fmt.Errorf("%s/list: %w", kind, err)
}

// innerError is err without mcp-go's "transport error: " wrapping.
func innerError(err error) error {
	var te *transport.Error
	for errors.As(err, &te) && te.Err != nil {
		err = te.Err
	}
	return err
}

// answerServerRequest answers a request the server sent on an event stream — its legacy
// HTTP+SSE stream, or a streamable HTTP GET or POST stream — as a stdio child's are answered
// (child.answerRequest): ping with an empty result, anything else with "method not found" (the
// connector declares no client capability). It runs on the stream's reader, so a server that
// floods requests while it does not take the answers stalls its own stream. mcp-go would
// answer each on a goroutine of its own, holding a POST open for up to 30 s (on streamable
// HTTP; its SSE transport takes requests for responses), and with -32603 for sampling, roots
// and elicitation. The answer is posted to the session's message endpoint (SSE) or URL
// (streamable HTTP); a server that does not take it within serverRequestWait gets none.
func (s *session) answerServerRequest(id json.RawMessage, method string) {
	header := http.Header{}
	var endpoint string
	switch tr := s.cl.GetTransport().(type) {
	case *sseWrap:
		u := tr.sse.GetEndpoint()
		if u == nil {
			return
		}
		endpoint = u.String()
	case *httpWrap:
		endpoint = s.c.sc.URL
		header.Set("Accept", "application/json, text/event-stream")
		if p := s.proto.Load(); p == nil || !mcp.IsModernProtocol(*p) {
			if sid := tr.http.GetSessionId(); sid != "" {
				header.Set(transport.HeaderKeySessionID, sid)
			}
		}
	default:
		return
	}
	answer := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`
	if method != string(mcp.MethodPing) {
		answer = `{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32601,"message":"method not supported by this client"}}`
	}
	ctx, cancel := context.WithTimeout(s.ctx, serverRequestWait)
	defer cancel()
	// Requests on an event stream answering this POST are not answered: a server could nest
	// them without end on this goroutine's stack.
	ctx = context.WithValue(ctx, answerKey{}, true)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte(answer)))
	if err != nil {
		return
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if p := s.proto.Load(); p != nil && *p != "" {
		req.Header.Set(transport.HeaderKeyProtocolVersion, *p)
	}
	for k, v := range s.c.sc.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// answerKey marks the context of the POST that carries an answer to a server's request.
type answerKey struct{}

// ping probes the connection: ping on legacy connections, server/discover on 2026-07-28
// (where ping was removed). A JSON-RPC error answer proves the server alive.
func (s *session) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.c.m.cfg.PingTimeout)
	defer cancel()
	stop := context.AfterFunc(s.lctx, cancel)
	defer stop()
	cctx, cp := withCapture(ctx)
	var err error
	if mcp.IsModernProtocol(s.protocol) {
		_, err = s.cl.Discover(cctx, mcp.DiscoverRequest{})
	} else {
		err = s.cl.Ping(cctx)
	}
	if s.isLost() {
		return s.lostErr
	}
	if err == nil {
		return nil
	}
	if _, _, rpcErr, _ := cp.snapshot(); rpcErr != nil {
		return nil
	}
	// A probe refused 429 or 503 says when to come back (the reconnection waits that long).
	return withRetryAfter(err, cp, time.Now())
}

// fastCall sends tools/call on a stdio session straight to the child's stdin, with the request's
// JSON built once, and takes the raw result straight from the child's reader: mcp-go's CallTool
// encodes and decodes the params three more times for its 2026-07-28 _meta and HTTP headers
// (which stdio ignores), its reader decodes every response twice, and CallTool decodes the
// whole result into types the connector never uses. The _meta is the one mcp-go
// declared on this session's own requests. It reports false, sending nothing, when it does not
// apply: not stdio, or a 2026-07-28 session whose _meta is not known yet.
func (s *session) fastCall(ctx context.Context, tool string, args json.RawMessage) (callResult, bool) {
	return s.fastToolCall(ctx, tool, args, nil)
}

// fastToolCall is fastCall with task, when not nil, as the params' task member: a
// task-augmented call, which is never cancelled with notifications/cancelled (tasks/cancel
// cancels a task).
func (s *session) fastToolCall(ctx context.Context, tool string, args, task json.RawMessage) (callResult, bool) {
	if s.stdio == nil {
		return callResult{}, false
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return callResult{}, false
	}
	params := make([]byte, 0, len(name)+len(args)+len(task)+40)
	params = append(params, `"name":`...)
	params = append(params, name...)
	if len(args) > 0 {
		params = append(params, `,"arguments":`...)
		if bytes.ContainsAny(args, "\r\n") {
			// One frame is one line: pretty-printed arguments are compacted (their strings
			// cannot hold a raw newline, so only whitespace goes).
			var buf bytes.Buffer
			if err := json.Compact(&buf, args); err != nil {
				return callResult{err: fmt.Errorf("arguments: %w", err)}, true
			}
			args = buf.Bytes()
		}
		params = append(params, args...)
	}
	if len(task) > 0 {
		params = append(params, `,"task":`...)
		params = append(params, task...)
	}
	return s.fastRequest(ctx, string(mcp.MethodToolsCall), name, params, task == nil)
}

// fastRequest sends method on a stdio session the way fastCall does, with members (the params'
// members, without braces; one line of JSON) and this session's _meta as its params, and returns
// the raw answer. tool is a tools/call's tool name as the request has it (JSON-quoted; nil for
// other methods), for an error that names the request. cancel says whether a request whose context ends is cancelled with
// notifications/cancelled. It reports false, sending nothing, when the fast path does not
// apply.
func (s *session) fastRequest(ctx context.Context, method string, tool, members []byte, cancel bool) (callResult, bool) {
	if s.stdio == nil {
		return callResult{}, false
	}
	var meta json.RawMessage
	if mcp.IsModernProtocol(s.protocol) {
		m := s.stdio.meta.Load()
		if m == nil {
			return callResult{}, false
		}
		meta = *m
	}
	params := make([]byte, 0, len(members)+len(meta)+16)
	params = append(params, '{')
	params = append(params, members...)
	if len(meta) > 0 {
		params = append(params, `,"_meta":`...)
		params = append(params, meta...)
	}
	params = append(params, '}')
	quoted, err := json.Marshal(method)
	if err != nil {
		return callResult{}, false
	}
	idText := fastIDPrefix + strconv.FormatUint(s.fastID.Add(1), 10)
	id := mcp.NewRequestId(idText)
	if err := ctx.Err(); err != nil {
		return callResult{err: err}, true
	}
	frame := make([]byte, 0, len(params)+len(idText)+len(quoted)+64)
	frame = append(frame, `{"jsonrpc":"2.0","id":"`...)
	frame = append(frame, idText...) // digits and a dash: nothing to escape
	frame = append(frame, `","method":`...)
	frame = append(frame, quoted...)
	frame = append(frame, `,"params":`...)
	frame = append(frame, params...)
	frame = append(frame, "}\n"...)
	// The child's reader hands the response straight to this call (fastRouter): it does not go
	// through mcp-go's reader, which would decode it twice more.
	answer := s.child.fast.register(idText)
	defer s.child.fast.forget(idText)
	if n, err := s.child.in.WriteCtx(ctx, frame); err != nil {
		return callResult{sent: n > 0, err: err}, true
	}
	got := func(r fastResponse) (callResult, bool) {
		switch {
		case r.tooLarge:
			return callResult{sent: true, err: fmt.Errorf("%w (a line over %d bytes)", errResponseTooLarge, s.child.lineBytes)}, true
		case r.malformed != "":
			// (bad: protocol_error, as a task's broken protocol is)
			what := method
			if tool != nil {
				what += " " + truncate(string(tool), 100) // cut to stay readable
			}
			return callResult{sent: true, bad: "the server's answer to " + what + " is not valid JSON: " + r.malformed}, true
		case r.batch:
			return callResult{sent: true, err: errBadBatch}, true
		}
		return callResult{raw: r.result, rpcErr: r.rpcErr, sent: true}, true
	}
	// An answer that came just before the end of the session or of stdout still counts.
	answered := func() (fastResponse, bool) {
		select {
		case r := <-answer:
			return r, true
		default:
			return fastResponse{}, false
		}
	}
	select {
	case r := <-answer:
		return got(r)
	case <-s.lost:
		if r, ok := answered(); ok {
			return got(r)
		}
		return callResult{sent: true, err: s.lostErr}, true
	case <-s.child.readerDone:
		if r, ok := answered(); ok {
			return got(r)
		}
		// No answer can come any more (stdout closed); the session is lost or soon will be.
		return callResult{sent: true, err: errors.New("the server closed its stdout")}, true
	case <-ctx.Done():
		// An answer that is in as the context ends is the outcome: nothing to cancel.
		if r, ok := answered(); ok {
			return got(r)
		}
		if !cancel {
			return callResult{sent: true, err: ctx.Err()}, true
		}
		// As mcp-go does: over stdio the only way to stop the server's work.
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": ctx.Err().Error()}},
		}}
		if data, err := json.Marshal(n); err == nil {
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = s.child.in.WriteCtx(nctx, append(data, '\n'))
			cancel()
		}
		return callResult{sent: true, err: ctx.Err()}, true
	}
}

// callResult is the outcome of one tools/call at the transport level.
type callResult struct {
	raw    []byte
	rpcErr *mcp.JSONRPCErrorDetails
	sent   bool
	err    error
	bad    string // the server broke the protocol (a task that could not complete): protocol_error
	// refused: the server answered the request's HTTP POST with a status that says it did not
	// process it (refusedStatus); sent is false.
	refused *subjects.Error
	// retryAfterMs: the request was sent and got no answer but an HTTP 503 with Retry-After
	// (unavailableRetryAfter): its outcome is unknown, and the server said when to come back.
	retryAfterMs int64
}

// callTool sends tools/call with args passed through byte for byte. The caller registered it
// with beginCall.
func (s *session) callTool(ctx context.Context, tool string, args json.RawMessage) callResult {
	if r, ok := s.fastCall(ctx, tool, args); ok {
		return r
	}
	cctx, cp := withCapture(ctx)
	req := mcp.CallToolRequest{Header: s.paramHeaders(tool, args)}
	req.Params.Name = tool
	if len(args) > 0 {
		req.Params.Arguments = args
	}
	_, err := s.cl.CallTool(cctx, req)
	sent, raw, rpcErr, terr := cp.snapshot()
	if err == nil && terr != nil {
		err = terr
	}
	if r, ok := s.brokenResult(toolsCallWhat(tool), raw, rpcErr, err); ok {
		return r
	}
	if refused := refusedRPCError(cp, raw, rpcErr); refused != nil {
		return callResult{err: err, refused: refused}
	}
	var refused *subjects.Error
	var retryAfter int64
	if raw == nil && rpcErr == nil {
		sent, refused = s.unrun(sent, err, cp)
		if sent {
			retryAfter = unavailableRetryAfter(cp, time.Now())
		}
	}
	if sent && raw == nil && rpcErr == nil && ended(ctx) {
		s.cancelHTTP(cp.requestID(), ctx)
	}
	return callResult{raw: raw, rpcErr: rpcErr, sent: sent, err: err, refused: refused, retryAfterMs: retryAfter}
}

// refusedRPCError is the refusal of a request whose answer, rpcErr, came as the body of an HTTP
// status that says the request was refused unprocessed whatever the body (429, 403, 405, 413,
// 415: see refusedStatus), as rate limiters and the TypeScript SDK's transport write one: mcp-go
// takes the body for the request's answer, which made a 429 the server's protocol_error, its
// Retry-After lost, though nothing ran. nil otherwise, and for a 400 or 422, whose JSON-RPC
// error says more than the status (a session or protocol problem of the server's).
func refusedRPCError(cp *capture, raw []byte, rpcErr *mcp.JSONRPCErrorDetails) *subjects.Error {
	if raw != nil || rpcErr == nil {
		return nil
	}
	status, retryAfter := cp.httpStatus()
	if status == http.StatusBadRequest || status == http.StatusUnprocessableEntity {
		return nil
	}
	return refusedStatus(status, retryAfter, time.Now())
}

// toolsCallWhat names a tools/call of tool for brokenText.
func toolsCallWhat(tool string) string {
	quoted, _ := json.Marshal(tool)
	return string(mcp.MethodToolsCall) + " " + truncate(string(quoted), 100)
}

// brokenResult is the outcome of request what (see brokenText) that got no answer but err:
// when an HTTP body or event that is not valid JSON answered it (cappedTransport), the
// protocol_error a stdio line that is not JSON gets (bad), not a failed connection; ok false
// otherwise.
func (s *session) brokenResult(what string, raw []byte, rpcErr *mcp.JSONRPCErrorDetails, err error) (callResult, bool) {
	var broken *brokenAnswerError
	if raw != nil || rpcErr != nil || !errors.As(err, &broken) {
		return callResult{}, false
	}
	return callResult{sent: true, err: err, bad: s.brokenText(what, broken)}, true
}

// brokenText is the error text of request what (a method, a tool's quoted name after it)
// whose answer was not valid JSON, as a stdio call's (fastRequest): where it breaks and how it
// begins, redacted and cut (quoteSample).
func (s *session) brokenText(what string, broken *brokenAnswerError) string {
	return "the server's answer to " + what + " is not valid JSON: " + broken.what +
		"; it begins " + printable(quoteSample(s.c.red, broken.head, 120))
}

// unavailableRetryAfter is the Retry-After, in milliseconds, of a request answered HTTP 503
// (0 for another status, or none): the call may have run (a proxy answers 503 when the
// server's connection ends after the request went out), so it is no refusal, but the server
// (or its proxy) said when to come back, and the executor, which retries the unknown outcome
// of a read-only or idempotent tool, must not send it again sooner.
func unavailableRetryAfter(cp *capture, now time.Time) int64 {
	if status, retryAfter := cp.httpStatus(); status == http.StatusServiceUnavailable {
		return retryAfterMs(retryAfter, now)
	}
	return 0
}

// unrun tells a request the server refused without running it (sent false), for a request
// that got neither a result nor a JSON-RPC error: refusedUnrun, or an HTTP status that says
// so, whose dispatch error is refused (refusedStatus). A request mcp-go refused itself (its
// session ended by an earlier 404) is not sent, with no refusal: it never reached the server.
func (s *session) unrun(sent bool, err error, cp *capture) (_ bool, refused *subjects.Error) {
	status, retryAfter := cp.httpStatus()
	if s.refusedUnrun(err, status) {
		if status == 0 {
			// No HTTP answer: mcp-go refused it itself, the session having ended (a 404 to
			// another request): it never left.
			return false, nil
		}
		// It reached the server, which refused it unrun: not "nothing was sent", which the
		// executor takes as a call that never reached a server (neverSent).
		return false, &subjects.Error{Code: subjects.CodeUnavailable, Message: fmt.Sprintf(
			"the server refused the call with HTTP %d without running it (its session or the host's credentials); nothing ran", status)}
	}
	if !sent {
		return false, nil
	}
	if refused = refusedStatus(status, retryAfter, time.Now()); refused != nil {
		return false, refused
	}
	return true, nil
}

// refusedUnrun reports whether err says that the server refused a request without running it
// — it does not know this session (HTTP 404 on legacy streamable HTTP: it restarted, or the
// session expired; the spec has a server answer so, and mcp-go sends nothing more on the
// session after one), or the host's credentials (HTTP 401) — and then marks the session lost,
// so that the connector reconnects (or reports why it cannot) at once instead of at the next
// probe. The caller may take such a request as not sent. status is the HTTP answer to the
// request's POST (0 if none came): when it accepted the request (2xx), the error came later,
// from the GET that resumes the request's event stream (SEP-1699: a server may end it before
// the answer) — the session is gone all the same, but the request was taken and may have run.
func (s *session) refusedUnrun(err error, status int) bool {
	if !errors.Is(err, transport.ErrSessionTerminated) && !errors.Is(err, transport.ErrAuthorizationRequired) {
		return false
	}
	s.markLost(fmt.Errorf("the server refused the session: %w", err))
	return status < 200 || status > 299
}

// ended reports whether ctx is done or its deadline has passed.
func ended(ctx context.Context) bool { return ctx.Err() != nil || pastDeadline(ctx) }

// pastDeadline reports whether ctx's deadline has passed, even if ctx does not say so yet:
// mcp-go's SSE transport times a request out with a timer of its own, which may fire just
// before the context's.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// cancelHTTP sends notifications/cancelled for a request whose caller stopped waiting, on a
// legacy (before 2026-07-28) streamable HTTP or SSE connection: there, closing the HTTP request
// does not cancel it (the spec says a disconnection is not a cancellation), and mcp-go sends the
// notification on stdio only. On 2026-07-28 over streamable HTTP ending the request's stream
// is the cancellation; over legacy HTTP+SSE a request has no stream of its own (its answer comes
// on the session's event stream), so the notification is the only cancellation whatever the
// protocol: without it a server that does not time its requests out (mcp-go's SSE server) held
// each timed-out call, a goroutine and whatever it was doing, until the session ended.
func (s *session) cancelHTTP(id mcp.RequestId, ctx context.Context) {
	_, sse := s.cl.GetTransport().(*sseWrap)
	if s.hc == nil || mcp.IsModernProtocol(s.protocol) && !sse || id.IsNil() {
		return
	}
	reason := "timeout"
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		reason = err.Error()
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}},
	}}
	// Off the caller's path, bounded, and never past the session.
	go func() {
		nctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		_ = s.cl.GetTransport().SendNotification(nctx, n)
	}()
}
