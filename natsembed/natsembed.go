package natsembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// Config configures the embedded server. The zero value listens on a random loopback port and
// keeps JetStream in a new temporary directory of its own, removed by Shutdown. A negative
// MaxPayload, MaxMemory, MaxStore or ReadyWait is an error of Start.
type Config struct {
	StoreDir   string        // JetStream store directory; "" → a new temporary one
	Listen     string        // host:port (port 0: any free port); "" → 127.0.0.1 with a random port; "none" → no TCP listener
	ServerName string        // "" → "mcpstream"
	MaxPayload int32         // 0 → subjects.MaxEventBytes
	MaxMemory  int64         // JetStream memory storage limit; 0 → nats-server's (75% of memory)
	MaxStore   int64         // JetStream file storage limit; 0 → nats-server's (75% of the free disk)
	ReadyWait  time.Duration // 0 → 10s; how long StartContext waits for the server (JetStream recovers its store first)
	// Waiting, if set, is called every 10 s while the server is not ready yet, with the time
	// waited: a large store takes a while to recover after an unclean stop.
	Waiting func(waited time.Duration)
	Logging bool // pass nats-server's log to stderr
	// Problems, if set, is given nats-server's warnings and errors (level "warn" or "error")
	// when Logging is off: a store that cannot be written (a full disk) is reported only
	// there, and every write then fails while the server still looks well.
	Problems func(level, msg string)
	// SyncInterval is how often JetStream fsyncs its store (0 → nats-server's 2 minutes).
	// Every stored message is written to the file at once; what a power loss or an OS crash
	// can take is what was written since the last fsync. SyncAlways fsyncs after every write
	// instead (slower: each stored message waits for the disk).
	SyncInterval time.Duration
	SyncAlways   bool
}

// ErrNotReady is returned when the server did not become ready in time.
var ErrNotReady = errors.New("embedded nats-server not ready")

// Server is a running embedded nats-server.
type Server struct {
	ns     *server.Server
	tmpDir string // the temporary store Shutdown removes ("" when Config.StoreDir was given)
}

// Start is StartContext without a context.
func Start(cfg Config) (*Server, error) { return StartContext(context.Background(), cfg) }

// StartContext starts the server and waits until it accepts connections: at most
// Config.ReadyWait, and no longer than ctx lasts (ErrNotReady wrapping ctx's error then). A
// server that gives up starting (its port in use, JetStream that cannot start) is ErrNotReady at
// once, with nats-server's reason.
func StartContext(ctx context.Context, cfg Config) (*Server, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxPayload", int64(cfg.MaxPayload)}, {"MaxMemory", cfg.MaxMemory}, {"MaxStore", cfg.MaxStore}, {"ReadyWait", int64(cfg.ReadyWait)},
		{"SyncInterval", int64(cfg.SyncInterval)}} {
		if f.v < 0 {
			// nats-server would read a negative JetStream limit as its default (75% of the
			// memory or disk), the opposite of a bound.
			return nil, fmt.Errorf("embedded nats-server: Config.%s is negative (%d)", f.name, f.v)
		}
	}
	opts := &server.Options{
		ServerName:         cfg.ServerName,
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		MaxPayload:         cfg.MaxPayload,
		NoSigs:             true,
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncInterval:       cfg.SyncInterval,
		SyncAlways:         cfg.SyncAlways,
	}
	if opts.ServerName == "" {
		opts.ServerName = "mcpstream"
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = subjects.MaxEventBytes
	}
	// max_pending must exceed max_payload.
	opts.MaxPending = int64(opts.MaxPayload) * 4
	switch cfg.Listen {
	case "":
		opts.Host, opts.Port = "127.0.0.1", -1
	case "none":
		opts.DontListen = true
	default:
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen address %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("nats listen address %q: bad port", cfg.Listen)
		}
		if p == 0 {
			p = server.RANDOM_PORT // nats-server reads 0 as its default port, 4222
		}
		opts.Host, opts.Port = host, p
	}
	// Without a StoreDir nats-server would use the fixed <tmp>/nats/jetstream, shared with
	// any other embedded server and without a lock: each server gets its own.
	tmpDir := ""
	if cfg.StoreDir == "" {
		d, err := os.MkdirTemp("", "mcpstream-nats-")
		if err != nil {
			return nil, fmt.Errorf("JetStream store: %w", err)
		}
		tmpDir, opts.StoreDir = d, d
	}
	fail := func(err error) (*Server, error) {
		if tmpDir != "" {
			os.RemoveAll(tmpDir)
		}
		return nil, err
	}
	// nats-server reports a store it cannot use only in its log, and then never gets ready:
	// the cause is found here, at once.
	if err := probeStore(opts.StoreDir); err != nil {
		return fail(err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fail(fmt.Errorf("embedded nats-server: %w", err))
	}
	// nats-server reports a listener it cannot open, or JetStream it cannot start, only in its
	// log (Fatalf), and then never gets ready: startLog keeps it, and the wait ends at once.
	sl := &startLog{}
	if cfg.Logging {
		ns.ConfigureLogger()
		sl.next = ns.Logger()
	} else {
		sl.problems = cfg.Problems
	}
	ns.SetLogger(sl, false, false)
	go ns.Start()
	wait := cfg.ReadyWait
	if wait == 0 {
		wait = 10 * time.Second
	}
	if err := waitReady(ctx, ns, wait, cfg.Waiting, sl); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fail(listenHint(err, sl.err(), cfg.Listen))
	}
	return &Server{ns: ns, tmpDir: tmpDir}, nil
}

// listenHint is err, StartContext's failure to get ready, with the remedy when nats-server's
// fatal message (logged) says it could not listen on listen: its reason says why (the address in
// use, or not one of this host's). Any other failure is err as it is: in particular a wait that
// ended with no such message was no port in use (nats-server says so at once), but a slow start
// (JetStream recovering a large store before it listens).
func listenHint(err error, logged, listen string) error {
	if !strings.Contains(logged, "Error listening on port") {
		return err
	}
	stop := ""
	if strings.Contains(logged, "address already in use") {
		stop = "stop the process listening on " + listen + ", or "
	}
	return fmt.Errorf("%w (%slisten on another address: mcpstream up --nats-listen, Config.Listen; port 0 for any free port)", err, stop)
}

// waitStep is how often waitReady looks at ctx; waitingEvery how often it calls waiting.
var (
	waitStep     = 250 * time.Millisecond
	waitingEvery = 10 * time.Second
)

// waitReady waits until ns accepts connections, for at most wait, while ctx lasts and until
// nats-server reports in sl that it failed to start, calling waiting (if set) every
// waitingEvery.
func waitReady(ctx context.Context, ns *server.Server, wait time.Duration, waiting func(time.Duration), sl *startLog) error {
	start := time.Now()
	next := waitingEvery
	for {
		waited := time.Since(start)
		if waited >= wait {
			return fmt.Errorf("%w after %s", ErrNotReady, wait)
		}
		if ready(ns, min(waitStep, wait-waited)) {
			return nil
		}
		if msg := sl.err(); msg != "" {
			return fmt.Errorf("%w: %s", ErrNotReady, msg)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: stopped while starting (%w)", ErrNotReady, err)
		}
		if waited = time.Since(start); waiting != nil && waited >= next {
			waiting(waited)
			next += waitingEvery
		}
	}
}

// ready is ns.ReadyForConnections (a test makes a server look slow to start).
var ready = (*server.Server).ReadyForConnections

// startLog is the embedded server's logger: it passes the log on to next (nats-server's stderr
// logger, with Config.Logging) and keeps the first fatal message, which nats-server logs
// before giving up on starting (its Start returns, and the server never gets ready). A fatal
// message is passed on as an error: the stderr logger's Fatalf would exit the process, which
// StartContext's error lets its caller do cleanly.
type startLog struct {
	next     server.Logger           // nil: the log is dropped (but for problems)
	problems func(level, msg string) // warnings and errors when next is nil (Config.Problems)
	mu       sync.Mutex
	fatal    string
}

func (l *startLog) err() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

func (l *startLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	if l.fatal == "" {
		l.fatal = fmt.Sprintf(format, v...)
	}
	l.mu.Unlock()
	if l.next != nil {
		l.next.Errorf(format, v...)
	}
}

func (l *startLog) Noticef(format string, v ...any) {
	if l.next != nil {
		l.next.Noticef(format, v...)
	}
}

func (l *startLog) Warnf(format string, v ...any) {
	if l.next != nil {
		l.next.Warnf(format, v...)
	} else if l.problems != nil {
		l.problems("warn", fmt.Sprintf(format, v...))
	}
}

func (l *startLog) Errorf(format string, v ...any) {
	if l.next != nil {
		l.next.Errorf(format, v...)
	} else if l.problems != nil {
		l.problems("error", fmt.Sprintf(format, v...))
	}
}

func (l *startLog) Debugf(format string, v ...any) {
	if l.next != nil {
		l.next.Debugf(format, v...)
	}
}

func (l *startLog) Tracef(format string, v ...any) {
	if l.next != nil {
		l.next.Tracef(format, v...)
	}
}

// probeStore checks that JetStream can keep its store under dir: the directory exists or can be
// made, and a file can be written in it.
func probeStore(dir string) error {
	js := filepath.Join(dir, "jetstream")
	if err := os.MkdirAll(js, 0o755); err != nil {
		return fmt.Errorf("JetStream store %s: %w", dir, err)
	}
	f, err := os.CreateTemp(js, ".probe-*")
	if err != nil {
		return fmt.Errorf("JetStream store %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ClientURL is the nats:// URL of the TCP listener ("" without one).
func (s *Server) ClientURL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// Connect opens an in-process client connection (no TCP) with the given options.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s.ns), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats-server: %w", err)
	}
	return nc, nil
}

// StreamWriteError is the write error of stream's store (in the server's global account, where
// connections without users are), nil while it has none. A store that failed a write (a full
// disk: no space left on device) stores nothing more until the server restarts, and JetStream
// answers no publish on it (no PubAck, as when one is lost): only this and the log tell.
func (s *Server) StreamWriteError(stream string) error {
	h := s.ns.Healthz(&server.HealthzOptions{Account: s.ns.GlobalAccount().Name, Stream: stream, Details: true})
	if h == nil {
		return nil
	}
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error") {
			return errors.New(e.Error)
		}
	}
	return nil
}

// Inner returns the nats-server for callers that need more of it (tests, monitoring).
func (s *Server) Inner() *server.Server { return s.ns }

// Shutdown stops the server and waits for it; JetStream flushes its store first. A temporary
// store (no Config.StoreDir) is removed.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
	}
}
