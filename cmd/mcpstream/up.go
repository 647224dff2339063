package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "up",
		summary: "run every role in one process (embedded NATS and demo servers by default)",
		run:     runUp,
	})
}

const upHelp = `
Runs the whole system in one process: every role (registrysync, indexer, executor, ...) and, unless
--nats is given, an embedded NATS server with JetStream whose store lives under --data.

Without --config the bundled demo MCP servers run (logging, ticketing, kb), each as a stdio child
of this binary; edit DATA/demo/NAME.control.json ({"hide":["tool"],"add":["tool"]}) while up runs
to change a demo server's tools (it announces list_changed).

The embedded NATS server listens on --nats-listen so other processes (the mcpstream client
commands, the nats CLI, more role processes) can connect. --nats-listen with --nats, and
--nats-creds without it, are usage errors (exit status 2): each is for the other kind of NATS.
HTTP on --http-listen serves
GET /healthz: 200 {"status":"ok",...} once every role runs, 503 before (from the moment HTTP
listens, while NATS starts and the streams are declared too), while stopping and while
the NATS connection is down (status nats_disconnected) or NATS does not answer a PING within
0.8 s (status nats_unresponsive: a half-open connection; the process reconnects by itself within
about a minute).
GET /metrics: Prometheus text format: Go runtime and process metrics, and per role
mcpstream_executor_*, mcpstream_catalog_* (label replica), mcpstream_server_* (label server) and
mcpstream_policy_* (label role: the digest of the policy the indexer and executor enforce, and
whether another instance enforces another; see mcpstream policy check).

Ctrl-C (SIGINT), SIGTERM or SIGHUP (not under nohup) stops everything cleanly: /healthz answers 503 at once, the roles stop
in reverse start order (in-flight work finishes, bounded by --stop-timeout less a margin of up to
5s: past it the others are stopped all the same, the stdio server children's process groups
are sent SIGKILL, and the exit status is 1), then HTTP, then NATS
is drained and the embedded server flushes its store. A signal while starting stops just as
cleanly. A second Ctrl-C or SIGTERM while stopping quits at once (exit status 130), killing the
stdio server children (SIGKILL to each one's process group) first. A stream deleted or recreated while the process runs stops it with an error (start it
again to declare the streams and rebuild).

Examples:
  mcpstream up
  mcpstream up --config mcpstream.yaml --data /var/lib/mcpstream
  mcpstream up --nats nats://10.0.0.1:4222,nats://10.0.0.2:4222 --config mcpstream.yaml`

// hostOptions configure a process that runs roles: `up` (every role) or one role's subcommand.
type hostOptions struct {
	NATS           natsFlags
	Embedded       bool   // run an embedded NATS server (up without --nats)
	NATSListen     string // embedded server's listener
	DataDir        string
	ConfigPath     string // "" = the bundled demo servers
	HTTPListen     string // "" = no HTTP
	LogLevel       string
	LogFormat      string // text | json
	Replica        string
	StreamReplicas int // 0 = keep what exists (1 when creating)
	StopTimeout    time.Duration
	Name           string // "up" or the role's name, for the NATS connection name and messages
	// flags is the flag set register added the flags to: which ones the command line gave.
	flags *flag.FlagSet
}

// register adds the flags shared by up and the role subcommands.
func (o *hostOptions) register(fs *flag.FlagSet, up bool) {
	o.flags = fs
	fs.StringVar(&o.DataDir, "data", "./.mcpstream", "state directory: embedded NATS store (up), catalogs, demo control files")
	fs.StringVar(&o.ConfigPath, "config", "", "configuration file (YAML: servers, policy, limits, search, streams, embeddedNats (up only); see README Configuration); default: the bundled demo servers")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format on stderr: text or json")
	fs.IntVar(&o.StreamReplicas, "stream-replicas", 0, "JetStream replicas of mcpstream's streams when created or updated (3 on a 3-node cluster); 0 = keep existing, 1 for new; at most 1 with up's embedded server")
	fs.DurationVar(&o.StopTimeout, "stop-timeout", 15*time.Second, "how long roles may take to stop after Ctrl-C")
	if up {
		fs.StringVar(&o.NATS.URL, "nats", "", "use this NATS server or cluster (comma-separated URLs) instead of the embedded one")
		fs.StringVar(&o.NATS.Creds, "nats-creds", os.Getenv(envNATSCreds), "NATS credentials file, with --nats (env "+envNATSCreds+")")
		fs.StringVar(&o.NATSListen, "nats-listen", "127.0.0.1:4222", "embedded NATS client listener host:port (port 0 = any free port, \"none\" = in-process only; not with --nats); it has no authentication: beyond loopback, up warns")
		fs.StringVar(&o.HTTPListen, "http-listen", "127.0.0.1:8080", "HTTP listener for /healthz and /metrics (port 0 = any free port, \"\" = none)")
	} else {
		o.NATS.register(fs)
		fs.StringVar(&o.HTTPListen, "http-listen", "", "HTTP listener for /healthz and /metrics (port 0 = any free port, \"\" = none)")
		if o.Name != "registrysync" { // one registrysync per set of servers: not replicated
			fs.StringVar(&o.Replica, "replica", "", "replica id when several replicas share one --data directory")
		}
	}
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// exposed reports whether the embedded server's listen address (host:port, or "none") is
// reachable from other hosts: not a loopback address ("localhost" is one; an unspecified
// address, 0.0.0.0 or [::], listens on every interface).
func exposed(listen string) bool {
	if listen == "none" {
		return false
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// embeddedReadyWait bounds how long up waits for its embedded nats-server to accept
// connections: JetStream recovers its store first, which after an unclean stop of a large
// store takes a while.
const embeddedReadyWait = 10 * time.Minute

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := hostOptions{Name: "up"}
	fs := newFlagSet("up", "up [flags]", upHelp)
	o.register(fs, true)
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("up: unexpected argument %q", rest[0])
	}
	o.Embedded = o.NATS.URL == ""
	// Flags for one kind of NATS only: with the other they would be ignored without a word.
	switch {
	case o.Embedded && flagGiven(fs, "nats-creds"):
		// (The environment default is for the clients, which share it: not an error.)
		usageError(fs, stderr, "--nats-creds needs --nats: the embedded NATS server takes no credentials", nil)
		return exitCode(2)
	case !o.Embedded && flagGiven(fs, "nats-listen"):
		usageError(fs, stderr, "--nats-listen is the embedded NATS server's listener, and with --nats URL up runs none: "+
			"drop --nats-listen (the clients connect to the --nats URL), or drop --nats to run the embedded server", nil)
		return exitCode(2)
	}
	names := make([]string, 0, len(roles))
	for _, r := range roles {
		names = append(names, r.name)
	}
	return runRoles(ctx, o, names, stdout, stderr)
}

// roleCommand is the subcommand that runs one role against a NATS server or cluster, for
// scaling out: `mcpstream NAME --nats URL --config FILE`. help says what the role does.
func roleCommand(name, summary, help string) command {
	return command{
		name:    name,
		summary: summary,
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			o := hostOptions{Name: name}
			fs := newFlagSet(name, name+" [flags]", help)
			o.register(fs, false)
			rest, err := parseFlags(fs, args, stdout, stderr)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return usageErrorf("%s: unexpected argument %q", name, rest[0])
			}
			return runRoles(ctx, o, []string{name}, stdout, stderr)
		},
	}
}

var setTimeFormat sync.Once

// newLogger returns the process logger on w: a console writer ("text") or JSON lines.
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", level)
	}
	// Process-wide (milliseconds in both formats): set once, since roles started in one process
	// (tests) log while a later one starts.
	setTimeFormat.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	switch format {
	case "json":
	case "text":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !isTerminal(w)}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want text or json", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// host is a running process of roles.
type host struct {
	log      zerolog.Logger
	names    []string
	nc       atomic.Pointer[nats.Conn] // the process's NATS connection (nil until connected): no role serves while it is down
	mu       sync.Mutex
	state    map[string]*roleState
	stopping atomic.Bool
}

type roleState struct {
	run     roleRun
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	started bool
}

// readiness reports whether every role is ready, and each role's state.
func (h *host) readiness() (bool, map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	all := !h.stopping.Load()
	out := make(map[string]string, len(h.names))
	for _, n := range h.names {
		st := h.state[n]
		switch {
		case st == nil || !st.started:
			out[n] = "starting"
			all = false
		case isClosed(st.done):
			out[n] = "stopped"
			all = false
		case st.run.Ready != nil && !st.run.Ready():
			out[n] = "starting"
			all = false
		default:
			out[n] = "ready"
		}
	}
	return all, out
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (h *host) healthz(w http.ResponseWriter, r *http.Request) {
	ok, states := h.readiness()
	connected, natsState := h.natsState()
	status, code := "ok", http.StatusOK
	switch {
	case h.stopping.Load():
		status, code = "stopping", http.StatusServiceUnavailable
	case h.nc.Load() == nil:
		// Still starting: the embedded server or the connection to NATS is not up yet.
		status, code = "starting", http.StatusServiceUnavailable
	case !connected:
		// The roles keep their state and resume once the connection is back; meanwhile none of
		// them serves (no search, no call, no registry event).
		status, code = "nats_disconnected", http.StatusServiceUnavailable
	case h.nc.Load().FlushTimeout(healthPingTimeout) != nil:
		// Connected on paper, but the server does not answer a PING: a half-open TCP
		// connection (a NATS host that vanished without closing it, a network partition) looks
		// connected until the client's own pings fail (natsPingInterval × natsMaxPingsOut), and
		// nothing is served meanwhile.
		status, code, natsState = "nats_unresponsive", http.StatusServiceUnavailable, "unresponsive"
	case !ok:
		status, code = "starting", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"status": status, "roles": states, "nats": natsState})
}

// healthPingTimeout bounds the PING /healthz sends to NATS: a probe answers within it (probes
// usually allow 1 s or more).
var healthPingTimeout = 800 * time.Millisecond

// natsPingInterval and natsMaxPingsOut detect a dead connection that TCP does not report (a
// half-open connection): the client reconnects after natsMaxPingsOut unanswered pings, within
// about a minute (nats.go's defaults, 2 min × 2, took up to 6 min).
const (
	natsPingInterval = 20 * time.Second
	natsMaxPingsOut  = 3
)

// natsState reports whether the process's NATS connection is up, and its state in words
// (connected, reconnecting, closed, ...).
func (h *host) natsState() (bool, string) {
	nc := h.nc.Load()
	if nc == nil {
		return false, "connecting"
	}
	st := nc.Status()
	return st == nats.CONNECTED, strings.ToLower(st.String())
}

// runRoles runs the named roles (in their registered order) until ctx is done or one fails.
func runRoles(ctx context.Context, o hostOptions, names []string, stdout, stderr io.Writer) (err error) {
	log, err := newLogger(stderr, o.LogLevel, o.LogFormat)
	if err != nil {
		return &badUsage{err}
	}
	log = log.With().Str("process", o.Name).Logger()
	// A signal while starting is a clean stop, as it is once serving: the step it interrupted
	// fails with the cancelled context.
	starting := true
	defer func() {
		if err != nil && starting && ctx.Err() != nil && !errors.Is(err, errStopTimeout) {
			log.Info().Err(err).Msg("interrupted while starting; stopped")
			err = nil
		}
	}()
	var selected []role
	for _, n := range names {
		r, ok := findRole(n)
		if !ok {
			return fmt.Errorf("unknown role %q", n)
		}
		selected = append(selected, r)
	}
	// The flags' values are usage errors (exit status 2), found before anything is created.
	if o.DataDir == "" {
		return usageErrorf("--data must not be empty")
	}
	if o.flags != nil && flagGiven(o.flags, "config") && strings.TrimSpace(o.ConfigPath) == "" {
		// Not the demo configuration, whose policy is the open one: --config "$VAR" with the
		// variable unset would run a role that allows every call.
		return usageErrorf("--config %q: want a configuration file (leave --config out for the bundled demo servers)", o.ConfigPath)
	}
	if o.StopTimeout <= 0 {
		return usageErrorf("--stop-timeout %s: must be positive", o.StopTimeout)
	}
	if o.StreamReplicas < 0 {
		return usageErrorf("--stream-replicas %d: want 0 (keep existing) or a replica count", o.StreamReplicas)
	}
	if o.Replica != "" && slices.Contains(names, "indexer") {
		if err := checkReplica(o.Replica); err != nil {
			return err
		}
	}
	if !o.Embedded {
		// (Checked again when connecting, as for the client commands.)
		if err := o.NATS.check(); err != nil {
			return &badUsage{err}
		}
	}
	if o.Embedded && o.StreamReplicas > 1 {
		return usageErrorf("--stream-replicas %d: the embedded NATS server is a single node, which keeps 1 replica: drop the flag, or run a cluster and give its URLs with --nats", o.StreamReplicas)
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	mkData := func() error {
		if err := mkdirAll(dataDir); err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		return nil
	}

	// A configuration is checked before anything is created.
	var cfg *fileConfig
	var pol *policy.Policy
	if o.ConfigPath != "" {
		// Only the connectors use the servers' secrets, and the executor redacts them from
		// audit events: other roles start without them in their environment.
		serverSecrets := slices.ContainsFunc(names, func(n string) bool { return n == "registrysync" || n == "executor" })
		if cfg, err = loadConfigFor(o.ConfigPath, os.LookupEnv, serverSecrets); err != nil {
			return err
		}
		if pol, err = policy.New(cfg.Policy); err != nil {
			return fmt.Errorf("%s: policy: %w", cfg.Path, err)
		}
	}

	// One `up` per data directory, with or without --nats: its indexer is always replica 0
	// of DATA/indexer, and a second one would find that catalog locked only after its
	// registrysync started — running the same servers a second time and publishing their
	// statuses on the way. An existing directory's lock is taken before the listeners: a
	// second `up` with the same flags would find the first one's ports taken and say only that.
	var unlock func()
	lockData := func() error {
		if o.Name != "up" || unlock != nil {
			return nil
		}
		u, err := lockDataDir(dataDir)
		if err != nil {
			return err
		}
		unlock = u
		return nil
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	if fi, err := os.Stat(dataDir); err == nil && fi.IsDir() {
		if err := lockData(); err != nil {
			return err
		}
	}

	// Listeners next, still before anything is created: a port in use is a clear error, and
	// leaves no data directory behind.
	var httpLn net.Listener
	if o.HTTPListen != "" {
		httpLn, err = net.Listen("tcp", o.HTTPListen)
		if err != nil {
			return fmt.Errorf("--http-listen %s: %w", o.HTTPListen, err)
		}
		defer httpLn.Close()
	}
	// nats-server would only log a port in use; check it here (port 0 picks a free one). The
	// probe is held until the embedded server starts.
	var natsProbe net.Listener
	if o.Embedded && o.NATSListen != "none" {
		natsProbe, err = net.Listen("tcp", o.NATSListen)
		if err != nil {
			return fmt.Errorf("--nats-listen %s: %w", o.NATSListen, err)
		}
		defer natsProbe.Close()
	}

	if err := mkData(); err != nil {
		return err
	}
	if cfg == nil {
		if cfg, err = demoConfig(dataDir, demoservers.Names()); err != nil {
			return err
		}
		if pol, err = policy.New(cfg.Policy); err != nil {
			return fmt.Errorf("demo configuration: policy: %w", err)
		}
	}
	// Kept, as a pattern may be meant as written, but likely a rule that matches nothing.
	for _, w := range policy.Warnings(cfg.Policy) {
		log.Warn().Str("config", cfg.Path).Str("rule", w.Rule).Str("pattern", w.Pattern).Msg("policy: " + w.String())
	}
	var nc *nats.Conn
	var natsURL string
	reconnected := make(chan struct{}, 1)
	natsErrs := newNATSErrors(log, o.NATS.inbox())
	connOpts := hostNATSOptions(log, o.Name, reconnected, natsErrs)
	if err := lockData(); err != nil { // a data directory up has just made
		return err
	}
	// HTTP serves from here on, so that /healthz answers 503 "starting" (and /metrics the
	// process's own) while NATS starts and the streams are declared, which may take a while on
	// a cluster, rather than leaving a probe's connection unanswered. It stops after the roles
	// (or at once when the start fails).
	h := &host{log: log, names: names, state: map[string]*roleState{}}
	var mux *http.ServeMux
	var reg *prometheus.Registry
	stopHTTP := func() {}
	httpURL := "none"
	if httpLn != nil {
		mux = http.NewServeMux()
		mux.HandleFunc("GET /healthz", h.healthz)
		var metrics http.Handler
		reg, metrics = newMetrics()
		reg.MustRegister(collectFunc(func(ch chan<- prometheus.Metric) {
			connected, _ := h.natsState()
			gauge(ch, natsConnected, boolValue(connected))
		}), collectFunc(natsErrs.collect))
		mux.Handle("GET /metrics", metrics)
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("http server")
			}
		}()
		stopHTTP = sync.OnceFunc(func() {
			h.stopping.Store(true)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			hs.Shutdown(sctx)
			cancel()
		})
		defer stopHTTP()
		httpURL = "http://" + httpLn.Addr().String() + " (GET /healthz, /metrics)"
	}
	env := &roleEnv{Config: cfg, Policy: pol, Log: log, DataDir: dataDir, Replica: o.Replica, StopTimeout: o.StopTimeout,
		policyLog: &lastLogged{last: map[string]string{}}}
	// What a role can check without NATS (the indexer's catalog, which another process may
	// hold) is done before connecting: the operator learns of it at once, not once NATS is up.
	// What a started role took over is its own to release.
	prepared := map[string]func(){}
	defer func() {
		for _, release := range prepared {
			release()
		}
	}()
	for _, r := range selected {
		if r.prepare == nil {
			continue
		}
		release, err := r.prepare(env)
		if err != nil {
			return err
		}
		prepared[r.name] = release
	}
	if o.Embedded {
		listen := o.NATSListen
		if natsProbe != nil {
			listen = natsProbe.Addr().String()
			natsProbe.Close()
		}
		ec := cfg.embeddedNATS() // the embeddedNats section: fsync, storage bounds
		ec.StoreDir = filepath.Join(dataDir, "nats")
		ec.Listen = listen
		ec.Logging = log.GetLevel() <= zerolog.TraceLevel // nats-server's own log, on stderr
		// Otherwise its warnings and errors only, in this log: a store on a full disk fails
		// every write and says so nowhere else.
		natsLog := log.With().Str("component", "nats-server").Logger()
		ec.Problems = func(level, msg string) {
			if level == "error" {
				natsLog.Error().Msg(msg)
			} else {
				natsLog.Warn().Msg(msg)
			}
		}
		// JetStream recovers its store before the server listens: after an unclean stop a
		// large store takes a while (the 10 s default made up fail, "is the port in use?",
		// and never start on it). Waited for as long as it takes, up to embeddedReadyWait,
		// said in the log every 10 s; a stop signal ends the wait.
		ec.ReadyWait = embeddedReadyWait
		ec.Waiting = func(waited time.Duration) {
			log.Info().Str("store", ec.StoreDir).Dur("waited", waited.Round(time.Second)).
				Msg("embedded nats-server still starting: JetStream is recovering its store")
		}
		srv, err := natsembed.StartContext(ctx, ec)
		if err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			log.Info().Msg("embedded nats-server stopped")
		}()
		natsURL = srv.ClientURL()
		if natsURL == "" {
			natsURL = "in-process only"
		}
		log.Info().Str("store", ec.StoreDir).Str("durability", syncDescription(ec)).Msg("embedded nats-server started")
		if exposed(listen) {
			log.Warn().Str("listen", listen).Msg("the embedded nats-server has no authentication and listens beyond this host: " +
				"anyone who reaches it can call tools and read results and audit events. Listen on 127.0.0.1, or run NATS with " +
				"users and permissions (nats.conf, --nats)")
		}
		nc, err = srv.Connect(connOpts...)
		if err != nil {
			return err
		}
		env.StreamWriteError = srv.StreamWriteError
	} else {
		if cfg.EmbeddedNATS != nil && o.Name == "up" {
			log.Warn().Str("config", cfg.Path).Msg("the embeddedNats section is not used: this process connects to a NATS server of its own (--nats), configured in that server's file")
		}
		n := o.NATS
		// The same handlers as on the embedded server's connection: disconnections and
		// reconnections of a real cluster are logged (the name option given twice: the last wins).
		nc, _, err = n.connect(o.Name, connOpts...)
		if err != nil {
			return err
		}
		natsURL = redactURL(n.URL)
	}
	h.nc.Store(nc)
	defer func() {
		h.stopping.Store(true) // when the start failed: /healthz says so until HTTP stops
		drained := make(chan struct{})
		nc.SetClosedHandler(func(*nats.Conn) { close(drained) })
		if nc.Drain() != nil {
			nc.Close()
			return
		}
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			nc.Close()
		}
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	origins, err := declareStreams(startCtx, js, o.StreamReplicas, cfg, log)
	cancelStart()
	if err != nil {
		return o.NATS.noJetStream(err)
	}

	env.NC, env.JS = nc, js
	env.HTTP, env.Metrics = mux, reg // nil without HTTP
	source := "demo servers"
	if cfg.Path != "" {
		source = cfg.Path
	}
	// The servers only where this process runs them (registrysync); the other roles read the
	// configuration's policy, limits and search settings.
	served := "config " + source
	if slices.Contains(names, "registrysync") {
		serverNames := make([]string, 0, len(cfg.Servers))
		for _, s := range cfg.Servers {
			serverNames = append(serverNames, s.Name)
		}
		served = "servers " + strings.Join(serverNames, ",") + " (" + source + ")"
		if len(serverNames) == 0 {
			served = "no servers (" + source + ")"
		}
	}
	// The roles that enforce the policy say which one (see mcpstream policy check).
	if slices.Contains(names, "indexer") || slices.Contains(names, "executor") {
		served += ", policy " + pol.Digest()
	}
	fmt.Fprintf(stdout, "mcpstream %s: NATS %s, HTTP %s, data %s, roles %s, %s\n",
		o.Name, natsURL, httpURL, dataDir, strings.Join(names, ","), served)

	failed := make(chan string, len(selected))
	var started []role
	defer func() {
		// /healthz answers 503 while the roles stop; HTTP stops last.
		h.stopping.Store(true)
		if stopErr := h.stopRoles(started, o.StopTimeout); stopErr != nil && err == nil {
			err = stopErr
		}
		stopHTTP()
	}()
	for _, r := range selected {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		st := &roleState{cancel: cancel, done: make(chan struct{})}
		h.mu.Lock()
		h.state[r.name] = st
		h.mu.Unlock()
		rlog := log.With().Str("role", r.name).Logger()
		renv := *env
		renv.Log = rlog
		run, err := r.start(rctx, &renv)
		if err != nil {
			cancel()
			close(st.done)
			return fmt.Errorf("start %s: %w", r.name, err)
		}
		delete(prepared, r.name) // the started role releases what it prepared
		// A role may publish what later roles need (registrysync's manager).
		env.Registry = renv.Registry
		h.mu.Lock()
		st.run, st.started = run, true
		h.mu.Unlock()
		started = append(started, r)
		go func() {
			defer close(st.done)
			err := run.Run(rctx)
			if err == nil && rctx.Err() == nil {
				err = errors.New("stopped on its own")
			}
			if rctx.Err() == nil {
				st.err = err
				rlog.Error().Err(err).Msg("role failed")
				failed <- r.name
			}
		}()
		rlog.Info().Msg("role started")
	}

	starting = false
	// A stream deleted or recreated under the running roles (NATS restarted without its store,
	// a stream removed by hand) leaves them serving stale state, silently: the indexer keeps
	// a catalog of the old stream and follows the new one from its old position, the workers'
	// consumer is gone, the connectors do not publish their lists again. The process stops
	// with an error instead: started again (systemd's Restart=on-failure), it declares the
	// streams and rebuilds from them.
	watchCtx, stopWatch := context.WithCancel(ctx)
	lost := make(chan error, 1)
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); lost <- watchStreams(watchCtx, js, origins, reconnected) }()
	// The watch ends before the process's command returns: it outlived it (a test's next run,
	// reading streamCheckEvery as another test set it, raced).
	defer func() { stopWatch(); <-watchDone }()
	select {
	case <-ctx.Done():
		log.Info().Msg("stopping")
		return nil
	case err := <-lost:
		if err == nil || ctx.Err() != nil {
			log.Info().Msg("stopping")
			return nil
		}
		log.Error().Err(err).Msg("stopping: restart this process to declare the streams again and rebuild from them")
		return err
	case name := <-failed:
		h.mu.Lock()
		ferr := h.state[name].err
		h.mu.Unlock()
		return fmt.Errorf("role %s: %w", name, ferr)
	}
}

// mkdirAll is os.MkdirAll(dir, 0o755), but a path through a symbolic link to nothing (a
// volume not mounted, a directory moved), or one that cannot be followed (a loop), is said to
// be one: MkdirAll's own error is "mkdir DIR: file exists", about a path that does not seem to
// exist.
func mkdirAll(dir string) error {
	err := os.MkdirAll(dir, 0o755)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	for p := dir; ; p = filepath.Dir(p) {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if _, serr := os.Stat(p); serr != nil {
				target, _ := os.Readlink(p)
				if !errors.Is(serr, fs.ErrNotExist) { // a loop (ELOOP), a directory not searchable
					return fmt.Errorf("%s is a symbolic link to %s, which cannot be followed: %v (%w)", p, target, errors.Unwrap(serr), err)
				}
				return fmt.Errorf("%s is a symbolic link to %s, which does not exist (%w)", p, target, err)
			}
		}
		if parent := filepath.Dir(p); parent == p {
			return err
		}
	}
}

// errStopTimeout is wrapped by the error of roles that did not stop within --stop-timeout.
var errStopTimeout = errors.New("stop timeout")

// stopRoles cancels the roles in reverse start order, each after the later ones stopped, all
// within timeout.
func (h *host) stopRoles(started []role, timeout time.Duration) error {
	deadline := time.After(timeout)
	for i := len(started) - 1; i >= 0; i-- {
		name := started[i].name
		h.mu.Lock()
		st := h.state[name]
		h.mu.Unlock()
		st.cancel()
		select {
		case <-st.done:
			h.log.Info().Str("role", name).Msg("role stopped")
		case <-deadline:
			// The others are stopped all the same (their stores closed, their sessions
			// ended), each given a moment.
			for j := i - 1; j >= 0; j-- {
				h.mu.Lock()
				other := h.state[started[j].name]
				h.mu.Unlock()
				other.cancel()
				select {
				case <-other.done:
				case <-time.After(2 * time.Second):
				}
			}
			// The process exits now, as a forced exit does: what must not outlive it (the stdio
			// children, whose clean stop's SIGTERM and SIGKILL the exit would cancel) is killed.
			runForcedExitHooks()
			return fmt.Errorf("%w: role %s did not stop within %s", errStopTimeout, name, timeout)
		}
	}
	return nil
}

// ensureStreams is declareStreams without a log.
func ensureStreams(ctx context.Context, js jetstream.JetStream, replicas int, fc *fileConfig) (map[string]time.Time, error) {
	return declareStreams(ctx, js, replicas, fc, zerolog.Nop())
}

// declareStreams declares mcpstream's streams and returns when each was created. With replicas 0
// an existing stream keeps its replica count (a role process never scales a cluster's streams
// down) and a new one gets 1. An existing stream keeps the limits the configuration does not
// give (see keepLimits) and the operator's settings mcpstream does not rely on (see
// keepOperatorSettings); a mirror is refused, not promoted (see notOurs). A change JetStream
// cannot undo that an earlier mcpstream cannot declare over (allow_msg_ttl turned on, see
// msgTTLTurnedOn) is logged as a warning.
func declareStreams(ctx context.Context, js jetstream.JetStream, replicas int, fc *fileConfig, log zerolog.Logger) (map[string]time.Time, error) {
	origins := map[string]time.Time{}
	for _, declared := range subjects.Streams(fc.streamOptions(max(replicas, 1))) {
		// A second try when another process created the stream between the look and the
		// create (two roles starting at once on an empty server, with other settings): the
		// stream is declared again over the one it made.
		for try := 1; ; try++ {
			cfg := declared
			var cur *jetstream.StreamConfig // the existing stream's, if any
			if s, err := js.Stream(ctx, cfg.Name); err == nil {
				cur = &s.CachedInfo().Config
				if err := notOurs(*cur); err != nil {
					return nil, err
				}
				if replicas == 0 {
					cfg.Replicas = cur.Replicas
				}
				keepLimits(&cfg, *cur, fc.streams)
				keepOperatorSettings(&cfg, *cur)
			} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
			}
			s, err := js.CreateOrUpdateStream(ctx, cfg)
			if cur == nil && try < 3 && errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("ensure stream %s: %w%s%s%s", cfg.Name, err, storageHint(err, cfg), existingHint(err, cfg, cur),
					overlapHint(ctx, js, err, cfg))
			}
			if cfg.Name == subjects.RegistryStream {
				if err := registryBounded(cfg); err != nil {
					return nil, err
				}
			}
			if cur != nil && !cur.AllowMsgTTL && s.CachedInfo().Config.AllowMsgTTL {
				msgTTLTurnedOn(log, cfg.Name)
			}
			origins[cfg.Name] = s.CachedInfo().Created
			break
		}
	}
	return origins, nil
}

// msgTTLTurnedOn logs that the declaration turned allow_msg_ttl on, in place, on stream name,
// which an earlier mcpstream declared without it: JetStream never turns it off again, and the
// builds from before keepOperatorSettings (which declare the stream without it and keep nothing
// of the existing one's) stop at start on that stream for good, with JetStream's bare refusal.
// Found on upgrade tests: a rollback, or a role of such a build restarting during a rolling
// upgrade, could not start and said nothing of why.
func msgTTLTurnedOn(log zerolog.Logger, name string) {
	log.Warn().Str("stream", name).Msg("allow_msg_ttl turned on on stream " + name + " (per-message TTLs, for the " +
		"confirmations of unchanged lists); JetStream cannot turn it off again: an mcpstream built before commit " +
		"7425bd7 (which declares the stream without it and keeps nothing of the existing one) now stops at start with " +
		"\"message TTL status can not be disabled\": upgrade every process that declares the streams (up, and " +
		"every role), and roll forward, not back (see README Operations, Upgrades)")
}

// notOurs refuses a stream of mcpstream's name that mcpstream must not change: one holding
// subjects that are not mcpstream's (see subjects.ForeignSubjects), or a mirror (of a
// disaster-recovery site, say), which the declaration's update would silently promote to a
// stream of its own, ending its mirroring for good.
func notOurs(cur jetstream.StreamConfig) error {
	if foreign := subjects.ForeignSubjects(cur); len(foreign) > 0 {
		return fmt.Errorf("ensure stream %s: the stream holds subjects that are not mcpstream's (%s): mcpstream would "+
			"replace them and their messages would stop being stored; if it is another application's, give mcpstream "+
			"its own NATS account; if those subjects are no longer used, remove them (nats stream edit %s) or delete "+
			"the stream (nats stream rm %s) and start again", cur.Name, strings.Join(foreign, ", "), cur.Name, cur.Name)
	}
	if cur.Mirror == nil {
		return nil
	}
	return fmt.Errorf("ensure stream %s: the stream is a mirror of %s, which mcpstream does not change: serving from "+
		"it would end the mirroring for good; if this server is to serve mcpstream, promote the mirror to a stream of its "+
		"own first (remove its mirror setting), or delete it (nats stream rm %s) and start again", cur.Name, cur.Mirror.Name, cur.Name)
}

// keepOperatorSettings gives the declaration cfg of an existing stream the settings of cur that
// mcpstream does not rely on and an operator may have set with `nats stream edit`: deny_delete
// and deny_purge (tamper protection: JetStream cannot cancel them, so declaring without them
// would stop every role at start; mcpstream never deletes nor purges messages), per-message TTLs
// and message schedules (which JetStream cannot disable either), compression, placement and
// user metadata. Per-message TTLs that mcpstream declares (the registry stream's) are enabled
// on a stream that has none: an earlier mcpstream declared it without.
func keepOperatorSettings(cfg *jetstream.StreamConfig, cur jetstream.StreamConfig) {
	cfg.DenyDelete, cfg.DenyPurge = cur.DenyDelete, cur.DenyPurge
	cfg.AllowMsgTTL, cfg.AllowMsgSchedules = cfg.AllowMsgTTL || cur.AllowMsgTTL, cur.AllowMsgSchedules
	cfg.Compression = cur.Compression
	cfg.Placement = cur.Placement
	if len(cur.Metadata) > 0 {
		cfg.Metadata = map[string]string{}
		for k, v := range cur.Metadata {
			if !strings.HasPrefix(k, "_nats.") { // the server's own, set again by it
				cfg.Metadata[k] = v
			}
		}
	}
}

// jsErrCodeStreamSubjectOverlap is JetStream's answer to a stream declaration whose subjects
// another stream takes already. nats.go does not name it.
const jsErrCodeStreamSubjectOverlap jetstream.ErrorCode = 10065

// overlapHint names the stream that holds the subjects of a declaration JetStream refused for
// an overlap (an archive of mcpstream.>, say): NATS's own text names neither stream. "" for any
// other error.
func overlapHint(ctx context.Context, js jetstream.JetStream, err error, cfg jetstream.StreamConfig) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeStreamSubjectOverlap || len(cfg.Subjects) == 0 {
		return ""
	}
	other := "another stream"
	if name, err := js.StreamNameBySubject(ctx, cfg.Subjects[0]); err == nil && name != cfg.Name {
		other = "stream " + name
	}
	return fmt.Sprintf(" (%s already takes subjects of %s, which mcpstream's streams need to themselves: remove them from "+
		"that stream, or delete it, and start again)", other, strings.Join(cfg.Subjects, ", "))
}

// JetStream's answers when a stream's storage cannot be reserved: on one server (10047), and
// when a cluster finds no peers with room (10023). nats.go names neither.
const (
	jsErrCodeStorageExceeded       jetstream.ErrorCode = 10047
	jsErrCodeInsufficientResources jetstream.ErrorCode = 10023
)

// storageHint explains a stream declaration that JetStream refused for lack of storage: it
// reserves a stream's max bytes from the server's file store limit (max_file_store; the
// embedded server's is 75% of the free disk) when the stream is declared, so a size bound of
// the streams section larger than what is left stops every role at start. NATS's own text
// names neither the setting nor the limit. "" for any other error.
func storageHint(err error, cfg jetstream.StreamConfig) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || (apiErr.ErrorCode != jsErrCodeStorageExceeded && apiErr.ErrorCode != jsErrCodeInsufficientResources) {
		return ""
	}
	what := "the streams' size bounds"
	switch {
	case cfg.MaxBytes <= 0:
	case cfg.Name == subjects.ResultsStream:
		what = sizeText(cfg.MaxBytes) + " for it (streams.resultsMaxBytes)"
	case cfg.Name == subjects.AuditStream:
		what = sizeText(cfg.MaxBytes) + " for it (streams.auditMaxBytes)"
	default:
		what = sizeText(cfg.MaxBytes) + " for it"
	}
	return fmt.Sprintf(" (JetStream reserves %s, with the other streams' bounds, from the server's "+
		"file store limit: max_file_store, or 75%% of the free disk for the embedded server; lower "+
		"streams.resultsMaxBytes or streams.auditMaxBytes, or give NATS more storage)", what)
}

// jsErrCodeStreamInvalidConfig is JetStream's answer to a stream declaration it refuses as
// such: among others, an update of a setting it cannot change in place.
const jsErrCodeStreamInvalidConfig jetstream.ErrorCode = 10052

// existingHint explains a declaration that JetStream refused because of what the existing stream
// (cur; nil when there was none) holds: a storage type or a retention policy it cannot change in
// place (a stream made by hand, or by another tool, before mcpstream declared it), or a max age
// kept from the stream (see keepLimits) shorter than the de-duplication window mcpstream
// declares. NATS's own text names neither the value found nor what to do. "" for any other
// error.
func existingHint(err error, cfg jetstream.StreamConfig, cur *jetstream.StreamConfig) string {
	var apiErr *jetstream.APIError
	if cur == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeStreamInvalidConfig {
		return ""
	}
	recreate := fmt.Sprintf("JetStream cannot change it on an existing stream: save what it holds if it matters "+
		"(nats stream backup %s DIR), delete it (nats stream rm %s) and start again to declare it", cfg.Name, cfg.Name)
	switch {
	case cur.Sealed:
		return fmt.Sprintf(" (the stream is sealed: it takes no more messages, and %s)", recreate)
	case cur.Storage != cfg.Storage:
		return fmt.Sprintf(" (the stream exists with %s storage, mcpstream declares it with %s storage; %s)",
			strings.ToLower(cur.Storage.String()), strings.ToLower(cfg.Storage.String()), recreate)
	case cur.Retention != cfg.Retention:
		return fmt.Sprintf(" (the stream exists with %s retention, mcpstream declares it with %s retention; %s)",
			retentionText(cur.Retention), retentionText(cfg.Retention), recreate)
	case cfg.MaxAge > 0 && cfg.Duplicates > cfg.MaxAge:
		fix := fmt.Sprintf("raise it (nats stream edit %s --max-age %s)", cfg.Name, durationText(cfg.Duplicates))
		switch cfg.Name {
		case subjects.ResultsStream:
			fix = "set streams.resultsMaxAge of at least " + durationText(cfg.Duplicates)
		case subjects.RegistryStream:
			fix = "remove it (nats stream edit " + cfg.Name + "): the registry stream is kept unbounded, every catalog rebuilds from its whole history"
		}
		return fmt.Sprintf(" (the stream's max_age %s, set outside the configuration and kept, is shorter than the "+
			"%s de-duplication window mcpstream declares: %s)", durationText(cfg.MaxAge), durationText(cfg.Duplicates), fix)
	}
	return ""
}

// registryBounded refuses a registry stream with a bound (kept by keepLimits from `nats stream
// edit`): catalogs and executors rebuild from its whole history, and what a bound drops — the
// snapshot of a server whose list did not change within it — a new replica never sees: its
// catalog lacks those tools, and nothing says so. nil when the stream is unbounded.
func registryBounded(cfg jetstream.StreamConfig) error {
	var bounds []string
	if cfg.MaxAge > 0 {
		bounds = append(bounds, "max_age "+durationText(cfg.MaxAge))
	}
	if cfg.MaxMsgs > 0 {
		bounds = append(bounds, fmt.Sprintf("max_msgs %d", cfg.MaxMsgs))
	}
	if cfg.MaxBytes > 0 {
		bounds = append(bounds, "max_bytes "+sizeText(cfg.MaxBytes))
	}
	if cfg.MaxMsgsPerSubject > 0 {
		bounds = append(bounds, fmt.Sprintf("max_msgs_per_subject %d", cfg.MaxMsgsPerSubject))
	}
	if len(bounds) == 0 {
		return nil
	}
	return fmt.Errorf("stream %s has %s, set outside the configuration: catalogs and executors rebuild from "+
		"the registry stream's whole history, and a server's snapshot the bound drops (its list unchanged "+
		"since) is missing from every catalog built after it; the registry stream is kept unbounded: remove "+
		"the bound (nats stream edit %s) and start again (registrysync publishes again the lists the "+
		"stream no longer holds)", cfg.Name, strings.Join(bounds, ", "), cfg.Name)
}

// retentionText names a retention policy as the README does.
func retentionText(r jetstream.RetentionPolicy) string {
	switch r {
	case jetstream.LimitsPolicy:
		return "limits"
	case jetstream.InterestPolicy:
		return "interest"
	case jetstream.WorkQueuePolicy:
		return "work queue"
	}
	return r.String()
}

// sizeText writes n bytes in the largest binary unit that divides it (20GiB, 512MiB, 1000B).
func sizeText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// keepLimits gives the declaration cfg of an existing stream the current value (cur) of every
// limit the configuration's streams section (named) does not set. The defaults apply when a
// stream is created; after that a declaration would otherwise undo, at every start, what an
// operator set with `nats stream edit` (max_age, max_bytes, max_msgs, max_msgs_per_subject) and
// the section says nothing about.
func keepLimits(cfg *jetstream.StreamConfig, cur jetstream.StreamConfig, named subjects.StreamOptions) {
	var age time.Duration
	var size int64
	switch cfg.Name {
	case subjects.ResultsStream:
		age, size = named.ResultsMaxAge, named.ResultsMaxBytes
	case subjects.AuditStream:
		age, size = named.AuditMaxAge, named.AuditMaxBytes
	}
	if age == 0 {
		cfg.MaxAge = cur.MaxAge
	}
	if size == 0 {
		cfg.MaxBytes = cur.MaxBytes
	}
	cfg.MaxMsgs, cfg.MaxMsgsPerSubject = cur.MaxMsgs, cur.MaxMsgsPerSubject
	if cfg.Name == subjects.CallsStream {
		// A per-tenant bound on waiting calls refuses the tenant's new call: without
		// discard_new_per_subject JetStream drops the subject's oldest request instead, even
		// with discard new, and that call was acknowledged to a caller who waits for it.
		cfg.DiscardNewPerSubject = cfg.MaxMsgsPerSubject > 0
	}
}

// streamCheckEvery is how often watchStreams checks the streams (and at once after a reconnect).
var streamCheckEvery = 5 * time.Second

// streamGoneChecks is how many checks in a row must find a stream missing before it counts as
// deleted (a cluster whose JetStream is still recovering may not know it yet), over at least
// streamGoneChecks-1 check periods: checks after reconnections come at any time, several in a
// moment (see watchStreams).
const streamGoneChecks = 3

// errStreamLost is returned by watchStreams.
var errStreamLost = errors.New("stream lost")

// watchStreams checks, every streamCheckEvery and after each reconnection, that the streams the
// process declared are still the ones it declared (origins: name → creation time). It returns
// an error wrapping errStreamLost once one was recreated or is missing, nil when ctx is done.
// Other failures (a timeout while NATS is away) are retried at the next check.
func watchStreams(ctx context.Context, js jetstream.JetStream, origins map[string]time.Time, reconnected <-chan struct{}) error {
	t := time.NewTicker(streamCheckEvery)
	defer t.Stop()
	missing := map[string]int{}
	since := map[string]time.Time{} // when each missing stream was first found missing
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-reconnected:
		}
		for name, created := range origins {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s, err := js.Stream(cctx, name)
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, jetstream.ErrStreamNotFound):
				// Counted in checks and in time: a check waiting on a lost connection, a tick and
				// the reconnection come due together, and a few reconnections in a row each add
				// one, so checks alone may all fall in the moment JetStream is still recovering.
				if missing[name] == 0 {
					since[name] = time.Now()
				}
				if missing[name]++; missing[name] >= streamGoneChecks &&
					time.Since(since[name]) >= time.Duration(streamGoneChecks-1)*streamCheckEvery {
					return fmt.Errorf("%w: stream %s was deleted while this process ran (did NATS restart without its store?)", errStreamLost, name)
				}
			case err != nil:
				// NATS away or busy: the next check tells.
			case !s.CachedInfo().Created.Equal(created):
				return fmt.Errorf("%w: stream %s was recreated while this process ran (created %s, was %s)", errStreamLost, name,
					s.CachedInfo().Created.UTC().Format(time.RFC3339), created.UTC().Format(time.RFC3339))
			default:
				missing[name] = 0
			}
		}
	}
}
