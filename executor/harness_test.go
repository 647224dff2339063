package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// waitLimit bounds every wait for a condition. A test fails only if the condition never comes,
// never because the machine is slow.
const waitLimit = 30 * time.Second

// parallel: most tests run one at a time (the package's default). The few marked t.Parallel
// spend seconds waiting (AckWait, hand-back delays, 2 s polls) on a rig of their own: NATS
// server, stdio children, proxies and temp dirs. They run after the others, two at a time
// with go test's default -parallel on 2 cores. Not parallel: tests that count the process's
// goroutines (TestClientLeavesNothingBehind), restart a NATS server on its old port
// (restartServer, the failover cluster: another test could take the port meanwhile), call
// t.Setenv, or are CPU-bound.

// childEnv makes the test binary an MCP server over stdio (the child of a real registrysync
// connector):
//
//	demo:<name>   demoservers.ServeStdio, control file in MCPSTREAM_TEST_CONTROL
//	fixture       the fixture server below
//	transport     newTransportFixture (TestTransportDifferential)
const childEnv = "MCPSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(serveChild(mode))
	}
	// Validation's wall-clock bound (3 s, plus 2 s a MiB) is no test's subject but the tests
	// that set their own limits: on a loaded machine under -race a schema compiled and checked
	// in milliseconds took over 3 s once, and a valid call was refused unavailable. The other
	// bounds (steps, sizes, costs) stay the product's.
	defaultValidationLimits.wall = 10 * time.Minute
	os.Exit(m.Run())
}

func serveChild(mode string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// MCPSTREAM_TEST_CHILD_CPUPROFILE=PREFIX: each child writes a CPU profile to PREFIX.PID, for
	// BenchmarkCall's MCP server share.
	if prefix := os.Getenv("MCPSTREAM_TEST_CHILD_CPUPROFILE"); prefix != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	var err error
	switch {
	case mode == "fixture":
		err = server.NewStdioServer(newFixture()).Listen(ctx, os.Stdin, os.Stdout)
	case mode == "transport":
		err = server.NewStdioServer(newTransportFixture()).Listen(ctx, os.Stdin, os.Stdout)
	case strings.HasPrefix(mode, "demo:"):
		err = demoservers.ServeStdio(ctx, strings.TrimPrefix(mode, "demo:"),
			demoservers.Options{ControlFile: os.Getenv("MCPSTREAM_TEST_CONTROL"), ControlInterval: 10 * time.Millisecond, Logs: 3000},
			os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown %s=%q", childEnv, mode)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	return 0
}

// Fixture schemas: what mcp-go's decoded Tool would lose, kept raw by the connector.
const (
	// shapeSchema (2020-12): $ref into $defs, oneOf and anyOf.
	shapeSchema = `{
  "type": "object",
  "$defs": {
    "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false}
  },
  "properties": {
    "shape": {"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "center": {"$ref": "#/$defs/point"}, "r": {"type": "number", "exclusiveMinimum": 0}}, "required": ["kind", "center", "r"]},
      {"type": "object", "properties": {"kind": {"const": "polygon"}, "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 3}}, "required": ["kind", "points"]}
    ]},
    "label": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}]}
  },
  "required": ["shape"]
}`
	// legacySchema (draft-07): definitions and $ref.
	legacySchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "definitions": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
  "properties": {"host": {"type": "string"}, "port": {"$ref": "#/definitions/port"}},
  "required": ["host", "port"]
}`
)

// hints sets all four annotations (mcp.NewTool defaults to destructive, not idempotent).
func hints(readOnly, destructive, idempotent bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		ReadOnlyHint: mcp.ToBoolPtr(readOnly), DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint: mcp.ToBoolPtr(idempotent), OpenWorldHint: mcp.ToBoolPtr(false),
	})
}

func rawTool(name, desc, schema string, opts ...mcp.ToolOption) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
	for _, o := range opts {
		o(&t)
	}
	return t
}

// newFixture is an mcp-go server with the tools the executor's tests need beyond the demo servers.
func newFixture() *server.MCPServer {
	srv := server.NewMCPServer("fixture", "1.0.0", server.WithToolCapabilities(true), server.WithRecovery(),
		server.WithMethodCacheHints(mcp.MethodToolsList, 400, mcp.CacheScopePublic))
	ok := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructured(map[string]any{"ok": true, "args": req.GetArguments()}, "ok"), nil
	}
	srv.AddTool(rawTool("shape", "Draw a shape.", shapeSchema, hints(true, false, true)), ok)
	srv.AddTool(rawTool("legacy", "Connect somewhere (draft-07 schema).", legacySchema, hints(true, false, true)), ok)
	srv.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo text, structured."), mcp.WithString("text", mcp.Required()), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := req.GetString("text", "")
			return mcp.NewToolResultStructured(map[string]any{"echo": text, "len": len(text)}, text), nil
		})
	srv.AddTool(mcp.NewTool("fail", mcp.WithDescription("Fails as a tool error."), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed on purpose"), nil
		})
	srv.AddTool(mcp.NewTool("broken", mcp.WithDescription("Fails at the protocol level."), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("internal breakage")
		})
	srv.AddTool(mcp.NewTool("slow", mcp.WithDescription("Sleeps ms milliseconds."), mcp.WithNumber("ms"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
				return mcp.NewToolResultText("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	var wiped atomic.Int64
	srv.AddTool(mcp.NewTool("wipe", mcp.WithDescription("Wipes something (destructive); counts its runs."), hints(false, true, false)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := wiped.Add(1)
			return mcp.NewToolResultStructured(map[string]any{"runs": n}, fmt.Sprintf("wiped (run %d)", n)), nil
		})
	addReportTools(srv)
	srv.AddTool(mcp.NewTool("exit", mcp.WithDescription("Ends the server process."), hints(false, false, false)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	return srv
}

// rigOptions shape a test system.
type rigOptions struct {
	servers []string // demo server names and "fixture"; nil → ticketing
	exec    Config   // executor configuration (Dispatcher, Relister default to the manager)
	// viaNATS makes the executor reach the connectors over NATS instead of in-process.
	viaNATS bool
	// backoffInitial of the connectors' reconnects (0 → 50ms).
	backoffInitial time.Duration
	// noExecutor starts no executor (the test starts its own with startExecutor).
	noExecutor bool
	// protocol pins the connectors' MCP protocol version ("" negotiates).
	protocol string
	// secrets are every connector's ServerConfig.Secrets (redacted from what it passes on).
	secrets []string
	// nats configures the embedded NATS server (its limits); the zero value is natstest's.
	nats natsembed.Config
	// extra are more connectors, configured as given (real npm servers, say): the rig does
	// not wait for their tools.
	extra []registrysync.ServerConfig
	// heartbeatEvery is the connectors' HeartbeatEvery (0: registrysync's default).
	heartbeatEvery time.Duration
	// logTo also gets the executors' log lines (every level), when set.
	logTo io.Writer
}

// rig is one test's system: embedded JetStream, a real registrysync manager with the servers as
// stdio children, one executor.
type rig struct {
	t       testing.TB
	env     *natstest.Env
	mgr     *registrysync.Manager
	ex      *Executor   // the first executor
	all     []*Executor // every executor started
	client  Client
	control map[string]string // server → control file
	dir     string
	logTo   io.Writer // rigOptions.logTo
}

func testLogger(t testing.TB) zerolog.Logger {
	level := zerolog.WarnLevel
	if os.Getenv("MCPSTREAM_TEST_DEBUG") != "" {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(level).With().Timestamp().Logger()
}

// serverConfig is the connector configuration of a test server.
func serverConfig(t testing.TB, dir, name string) (registrysync.ServerConfig, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, name+".control.json")
	mode := "demo:" + name
	if name == "fixture" {
		mode = "fixture"
	}
	// A -race child sleeps atexit_sleep_ms (1 s by default) before it exits once its stdin
	// closes: every rig's manager stop took that second. The races a child reports while it
	// runs are reported as before; it no longer lingers for late ones at exit.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	env := map[string]string{childEnv: mode, "MCPSTREAM_TEST_CONTROL": control, "GORACE": gorace}
	if p := os.Getenv("MCPSTREAM_TEST_CHILD_CPUPROFILE"); p != "" {
		env["MCPSTREAM_TEST_CHILD_CPUPROFILE"] = p
	}
	return registrysync.ServerConfig{
		Name: name, Transport: registrysync.TransportStdio, Command: exe,
		Env:         env,
		Kinds:       []string{"tools"},
		CallTimeout: 20 * time.Second,
	}, control
}

func startRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	env := startNATS(t, o.nats)
	r := &rig{t: t, env: env, control: map[string]string{}, dir: t.TempDir(), logTo: o.logTo}
	if o.servers == nil {
		o.servers = []string{"ticketing"}
	}
	var scs []registrysync.ServerConfig
	for _, name := range o.servers {
		sc, control := serverConfig(t, r.dir, name)
		sc.ProtocolVersion = o.protocol
		sc.Secrets = o.secrets
		scs = append(scs, sc)
		r.control[name] = control
	}
	scs = append(scs, o.extra...)
	bi := o.backoffInitial
	if bi == 0 {
		bi = 50 * time.Millisecond
	}
	r.mgr = registrysync.New(env.JS, env.NC, registrysync.Config{
		Servers: scs, Debounce: 5 * time.Millisecond, BackoffInitial: bi, BackoffMax: max(bi, 400*time.Millisecond),
		ResyncEvery: -1, PingEvery: -1, DrainTimeout: 2 * time.Second, HeartbeatEvery: o.heartbeatEvery,
	}, testLogger(t).With().Str("role", "registrysync").Logger())
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- r.mgr.Run(mctx) }()
	t.Cleanup(func() {
		mcancel()
		select {
		case <-mdone:
		case <-time.After(waitLimit):
			t.Errorf("registrysync did not stop")
		}
	})
	waitFor(t, "connectors ready", r.mgr.Ready)

	cfg := o.exec
	if !o.viaNATS {
		if cfg.Dispatcher == nil {
			cfg.Dispatcher = r.mgr
		}
		if cfg.Relister == nil {
			cfg.Relister = r.mgr
		}
	}
	r.client = Client{NC: env.NC, JS: env.JS}
	if o.noExecutor {
		return r
	}
	r.startExecutor(cfg, env.NC)
	for _, name := range o.servers {
		if name == "fixture" {
			r.waitTool("fixture__echo")
		} else {
			r.waitTool(subjects.PublicName(name, firstTool[name]))
		}
	}
	return r
}

var firstTool = map[string]string{"ticketing": "createIssue", "logging": "getLogs", "kb": "search_knowledge_base"}

// envSeeds is the seeds a seeded test runs: PREFIX_SEEDS=N of them (def when unset) from
// PREFIX_SEED0 (1 when unset).
func envSeeds(prefix string, def int) (first uint64, n int) {
	first, n = 1, def
	if v, err := strconv.Atoi(os.Getenv(prefix + "_SEEDS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.ParseUint(os.Getenv(prefix+"_SEED0"), 10, 64); err == nil {
		first = v
	}
	return first, n
}

// startExecutor runs another executor process on nc (stopped at cleanup).
func (r *rig) startExecutor(cfg Config, nc *nats.Conn) *Executor {
	r.t.Helper()
	cfg.Log = testLogger(r.t).With().Str("role", "executor").Logger()
	if r.logTo != nil {
		cfg.Log = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(r.t), r.logTo)).With().Timestamp().Str("role", "executor").Logger()
	}
	ex, err := New(nc, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				r.t.Errorf("executor Run: %v", err)
			}
		case <-time.After(waitLimit):
			r.t.Errorf("executor did not stop")
		}
	})
	waitFor(r.t, "executor ready", func() bool {
		select {
		case err := <-done:
			r.t.Fatalf("executor Run: %v", err)
		default:
		}
		return ex.Ready()
	})
	if r.ex == nil {
		r.ex = ex
	}
	r.all = append(r.all, ex)
	return ex
}

// waitTool waits until every executor of the rig with workers knows a public name.
func (r *rig) waitTool(public string) {
	r.t.Helper()
	waitFor(r.t, "tool "+public+" listed", func() bool {
		for _, ex := range r.all {
			if !ex.cfg.NoWorkers && ex.reg.lookup(public) == nil {
				return false
			}
		}
		return true
	})
}

// managerConfig is the executor configuration that reaches the rig's connectors in-process.
func (r *rig) managerConfig(cfg Config) Config {
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = r.mgr
	}
	if cfg.Relister == nil {
		cfg.Relister = r.mgr
	}
	return cfg
}

// waitFor polls cond every 10ms until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call sends a call through the NATS API (request/reply on the exec subject).
func (r *rig) call(tenant, tool, args string, mod ...func(*subjects.CallRequest)) subjects.CallResult {
	r.t.Helper()
	req := subjects.CallRequest{Tool: tool, Principal: subjects.Principal{User: "local"}}
	if args != "" {
		req.Arguments = json.RawMessage(args)
	}
	for _, m := range mod {
		m(&req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := r.client.Call(ctx, tenant, req)
	if err != nil {
		r.t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// ticketCount counts the ticketing server's tickets, directly through the connector.
func (r *rig) ticketCount() int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	rep := r.mgr.Dispatch(ctx, "ticketing", subjects.DispatchRequest{V: 1, CallID: "count", Tool: "listIssues", Arguments: json.RawMessage(`{"limit":1}`)})
	if rep.Error != nil {
		r.t.Fatalf("listIssues: %v", rep.Error)
	}
	var res struct {
		StructuredContent struct {
			Total int `json:"total"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(rep.Result, &res); err != nil {
		r.t.Fatalf("listIssues result: %v: %s", err, rep.Result)
	}
	return res.StructuredContent.Total
}

// setControl writes a demo server's control file atomically.
func (r *rig) setControl(server string, c demoservers.Control) {
	r.t.Helper()
	data, _ := json.Marshal(c)
	tmp := r.control[server] + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.control[server]); err != nil {
		r.t.Fatal(err)
	}
}

// publishRegistry publishes a registry event by hand, as a connector would, and returns its
// stream sequence.
func (r *rig) publishRegistry(subject string, v any) uint64 {
	r.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := r.env.JS.Publish(ctx, subject, data)
	if err != nil {
		r.t.Fatal(err)
	}
	return ack.Sequence
}

// auditEvents returns the audit events of a call id, in order.
func (r *rig) auditEvents(tenant, id string) []subjects.AuditEvent {
	r.t.Helper()
	return r.auditEventsWhere(func(ev subjects.AuditEvent) bool { return ev.CallID == id && ev.Tenant == tenant })
}

// auditEventsWhere returns the audit events that match, in order.
func (r *rig) auditEventsWhere(match func(subjects.AuditEvent) bool) []subjects.AuditEvent {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []subjects.AuditEvent
	info, err := stream.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		var ev subjects.AuditEvent
		if json.Unmarshal(m.Data, &ev) == nil && match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// counter is a concurrency-safe tally for tests.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// shortenDedup sets the de-duplication window of the named streams to window, so that a test
// can resend a call id once the streams have forgotten it.
func (r *rig) shortenDedup(ctx context.Context, window time.Duration, streams ...string) {
	r.t.Helper()
	for _, name := range streams {
		s, err := r.env.JS.Stream(ctx, name)
		if err != nil {
			r.t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Duplicates = window
		if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
			r.t.Fatal(err)
		}
	}
}

// waitCallsSettled waits until the calls stream holds no request (every one was answered and
// acknowledged).
func (r *rig) waitCallsSettled(ctx context.Context) {
	r.t.Helper()
	s, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, "every request settled", func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

// runUntilStopped runs ex until the test stops it: stop (once; also at cleanup) ends its Run and
// checks that it ended without an error (an executor stopped hands its waiting calls back).
func runUntilStopped(t testing.TB, ex *Executor) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("executor Run: %v", err)
				}
			case <-time.After(waitLimit):
				t.Errorf("executor did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
