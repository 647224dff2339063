package demoservers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxStdioLine bounds one JSON-RPC message read from a stdio client.
const maxStdioLine = 32 << 20

// eofGrace bounds how long ServeStdio lets in-flight requests finish after
// its input ends.
const eofGrace = 2 * time.Second

// shutdownGrace bounds how long ServeHTTP waits for in-flight requests.
const shutdownGrace = 5 * time.Second

// ServeStdio serves the named demo server over newline-delimited JSON-RPC:
// requests are read from in, responses and notifications written to out,
// diagnostics to opts.ErrorLog (stderr). It returns nil when in reaches EOF
// or ctx is done, and an error for an unknown name or a broken stream.
// When ctx ends while a read on in is blocked, the reading goroutine stays
// until in is closed or yields data.
//
// Unlike mcp-go's own StdioServer, which keeps its session in a package-level
// variable, each call has its own session, so several stdio servers can run
// in one process (as tests do).
func ServeStdio(ctx context.Context, name string, opts Options, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the control file watcher
	srv, err := NewWatched(ctx, name, opts)
	if err != nil {
		return err
	}
	return serveStdio(ctx, srv, opts.logger(name), in, out)
}

var stdioSessions atomic.Int64

// stdioSession is one stdio client connection.
type stdioSession struct {
	id            string
	notifications chan mcp.JSONRPCNotification
	initialized   atomic.Bool
	legacy        atomic.Bool // the client sent initialize (protocol <= 2025-11-25)

	mu           sync.Mutex
	clientInfo   mcp.Implementation
	capabilities mcp.ClientCapabilities
	filter       mcp.SubscriptionFilter
	subscribed   bool
}

func (s *stdioSession) SessionID() string                                   { return s.id }
func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.notifications }
func (s *stdioSession) Initialize()                                         { s.initialized.Store(true) }
func (s *stdioSession) Initialized() bool                                   { return s.initialized.Load() }

func (s *stdioSession) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientInfo
}

func (s *stdioSession) SetClientInfo(info mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clientInfo = info
}

func (s *stdioSession) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capabilities
}

func (s *stdioSession) SetClientCapabilities(c mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capabilities = c
}

// SetSubscriptionFilter and SubscriptionFilter make the 2026-07-28 opt-in
// (subscriptions/listen) effective on this session: a client that did not
// send initialize gets only the notification types it subscribed to, and
// none before it subscribes. (mcp-go's own stdio and in-process sessions
// deliver every notification to such clients.)
func (s *stdioSession) SetSubscriptionFilter(f mcp.SubscriptionFilter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filter, s.subscribed = f, !f.IsEmpty()
}

func (s *stdioSession) SubscriptionFilter() (mcp.SubscriptionFilter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.subscribed && !s.legacy.Load() {
		return mcp.SubscriptionFilter{}, true // modern and not listening: nothing
	}
	return s.filter, s.subscribed
}

// lineWriter writes one JSON message per line, serialized.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.out.Write(b)
	return err
}

func serveStdio(ctx context.Context, srv *server.MCPServer, logger *log.Logger, in io.Reader, out io.Writer) error {
	sess := &stdioSession{
		id:            fmt.Sprintf("stdio-%d", stdioSessions.Add(1)),
		notifications: make(chan mcp.JSONRPCNotification, 128),
	}
	if err := srv.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("register stdio session: %w", err)
	}
	defer srv.UnregisterSession(context.WithoutCancel(ctx), sess.id)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reqCtx := srv.WithContext(ctx, sess)
	w := &lineWriter{out: out}

	// requests are ordinary requests; streams are subscriptions/listen
	// requests, which block until cancelled.
	var notifier, requests, streams sync.WaitGroup
	defer notifier.Wait()
	defer streams.Wait()
	defer requests.Wait()
	defer cancel() // runs first: releases blocked handlers and the notifier

	notifier.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-sess.notifications:
				if err := w.write(n); err != nil {
					logger.Printf("stdio: write notification: %v", err)
				}
			}
		}
	})

	lines, readErr := readLines(ctx, in)

	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("read stdio: %w", err)
			}
			// EOF: let requests already read finish and answer (bounded);
			// listen streams are simply closed.
			drained := make(chan struct{})
			go func() { requests.Wait(); close(drained) }()
			t := time.NewTimer(eofGrace)
			defer t.Stop()
			select {
			case <-drained:
			case <-t.C:
			case <-ctx.Done():
			}
			return nil
		case line := <-lines:
			if len(line) == 0 {
				continue
			}
			handle := func() {
				resp := srv.HandleMessage(reqCtx, json.RawMessage(line))
				if resp == nil {
					return
				}
				if err := w.write(resp); err != nil {
					logger.Printf("stdio: write response: %v", err)
				}
			}
			// Requests run on their own goroutines: a blocking one
			// (subscriptions/listen) must not stall the read loop.
			// Notifications are handled in order, on the read loop.
			method, isReq := requestMethod(line)
			if isReq && method == string(mcp.MethodInitialize) {
				sess.legacy.Store(true)
			}
			switch {
			case isReq && method == string(mcp.MethodSubscriptionsListen):
				streams.Go(handle)
			case isReq:
				requests.Go(handle)
			default:
				handle()
			}
		}
	}
}

// Handler returns an http.Handler serving the named demo server over
// streamable HTTP at /mcp and over the legacy HTTP+SSE transport at /sse
// (messages posted to /message). ctx bounds the control file watcher; when it
// is done, open SSE and listening streams are closed too.
func Handler(ctx context.Context, name string, opts Options) (http.Handler, error) {
	srv, err := NewWatched(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	logw := opts.ErrorLog
	if logw == nil {
		logw = opts.logger(name).Writer()
	}
	streamable := server.NewStreamableHTTPServer(srv,
		server.WithEndpointPath("/mcp"),
		server.WithStreamableHTTPLogger(slog.New(slog.NewTextHandler(logw, nil)).With("server", name)),
	)
	sse := server.NewSSEServer(srv,
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", streamable)
	mux.Handle("/sse", sse)
	mux.Handle("/message", sse)
	go func() {
		<-ctx.Done()
		sse.CloseSessions()
		streamable.CloseSessions(context.WithoutCancel(ctx))
	}()
	return refuseForeignOrigins(mux), nil
}

// refuseForeignOrigins answers 403 to browser requests from pages of other origins (the MCP
// transport rules: servers validate Origin). Without it any web page could drive a local demo
// server over HTTP+SSE: /sse allows every origin to read its stream, and /message takes a
// text/plain POST, which browsers send cross-origin without a preflight. Requests without an
// Origin (non-browser clients), from the server's own origin or from a loopback origin (a local
// inspector) are served.
func refuseForeignOrigins(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowedOrigin(origin, r.Host) {
			http.Error(w, "Forbidden: cross-origin request", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (sandboxed pages, files) included
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// ServeHTTP listens on addr (e.g. "127.0.0.1:8080") and serves Handler until
// ctx is done, then shuts down gracefully. It returns nil after a shutdown
// caused by ctx.
func ServeHTTP(ctx context.Context, name string, opts Options, addr string) error {
	if _, ok := specs[name]; !ok {
		return fmt.Errorf("demo server %q: %w", name, ErrUnknownServer)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return ServeHTTPListener(ctx, name, opts, ln)
}

// ServeHTTPListener is ServeHTTP on an existing listener, which it closes.
func ServeHTTPListener(ctx context.Context, name string, opts Options, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := Handler(ctx, name, opts)
	if err != nil {
		ln.Close()
		return err
	}
	logger := opts.logger(name)
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
		// Request contexts end with ctx, so long-lived streams
		// (subscriptions/listen, SSE) do not hold up Shutdown.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	logger.Printf("serving %s on http://%s/mcp (streamable HTTP) and /sse (SSE)", name, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer stop()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// requestMethod returns the method of a JSON-RPC message and whether it is a
// request (it has a method and an id).
func requestMethod(line []byte) (string, bool) {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return "", false
	}
	return m.Method, m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// readLines reads in line by line (each at most maxStdioLine bytes) on its own goroutine until
// EOF, a read error (sent on the second channel, nil at EOF) or the end of ctx.
func readLines(ctx context.Context, in io.Reader) (<-chan []byte, <-chan error) {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), maxStdioLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	return lines, readErr
}
