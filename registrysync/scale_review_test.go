package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// cutProxy forwards loopback TCP connections to NATS; cut, it closes them and refuses new ones
// (a partition between one process and NATS, while the others still reach it).
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) setCut(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = v
	if v {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// runVia runs a Manager with cfg on env's JetStream through its own connection to url.
func runVia(t *testing.T, env *natstest.Env, url string, cfg Config) (*harness, *nats.Conn) {
	t.Helper()
	return runViaWith(t, env, url, cfg, nil)
}

// runViaWith is runVia, with setup (if not nil) called on the Manager before Run starts.
func runViaWith(t *testing.T, env *natstest.Env, url string, cfg Config, setup func(*Manager)) (*harness, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{env: env, m: New(js, nc, cfg, testLogger(t)), done: make(chan error, 1)}
	if setup != nil {
		setup(h.m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h, nc
}

// `servers remove` run while the registrysync that runs the server is cut off from NATS (its
// endpoints gone, so nobody answered for the server) retracted it; once that process was back it
// went on running the server — answering its calls and re-lists — while the registry said
// "removed" with empty lists, until the server's connection happened to change. A restarted
// process publishes its servers again; one that reconnects does the same for a server whose last
// status another process wrote as not served (removed), with its lists.
func TestRemoveWhileCutOffUndoneOnReconnect(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	proxy := startCutProxy(t, strings.TrimPrefix(env.URL, "nats://"))
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "mv", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	a, anc := runVia(t, env, proxy.url(), cfg)
	rec := record(t, env, subjects.RegistryServer("mv"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rec.wait(0, "tools", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) > 0 }))

	proxy.setCut(true)
	waitUntil(t, "a cut off", func() bool { return !anc.IsConnected() })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	waitUntil(t, "a's endpoints gone", func() bool {
		_, err := env.NC.Request(subjects.Relist("mv"), []byte(`{"v":1,"kind":"-"}`), time.Second)
		return err == nats.ErrNoResponders
	})
	if err := New(env.JS, env.NC, Config{}, testLogger(t)).Remove(ctx, "mv"); err != nil {
		t.Fatalf("remove while a is cut off: %v", err)
	}
	removed := rec.wait(0, "removed", isStatus(subjects.StatusRemoved, ""))
	emptied := rec.wait(removed.seq, "tools retracted", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) == 0 }))

	proxy.setCut(false)
	waitUntil(t, "a reconnected", anc.IsConnected)
	if !a.m.Serves("mv") {
		t.Fatal("a no longer runs mv")
	}
	rec.wait(removed.seq, "ready again", isStatus(subjects.StatusReady, ""))
	rec.wait(emptied.seq, "tools published again", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) > 0 }))
	if r := dispatch(t, a, "mv", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}); r.Error != nil {
		t.Errorf("call after the reconnection: %+v", r.Error)
	}
}

// snoop subscribes to every relist subject without ever answering, as `nats sub '>'` does.
func snoop(t *testing.T, env *natstest.Env) *atomic.Int64 {
	t.Helper()
	var seen atomic.Int64
	nc := env.Connect(t)
	if _, err := nc.Subscribe(subjects.RelistAll, func(*nats.Msg) { seen.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &seen
}

// A subscriber that never answers on the relist subjects (an operator's `nats sub '>'` while
// debugging) is no registrysync: a stopping one still publishes its servers connector_stopped,
// rather than taking the silent subscriber for another process running them and leaving them
// "ready" until a watchdog declares them lost.
func TestStopWithRelistSnooperPublishesConnectorStopped(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig(ServerConfig{Name: "svc", URL: url}))
	rec := record(t, h.env, subjects.RegistryServer("svc"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	seen := snoop(t, h.env)
	h.stop(t)
	if seen.Load() == 0 {
		t.Error("the stopping process did not ask whether another one runs svc")
	}
	rec.wait(ready.seq, "stopped", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped))
}

// `servers remove` of a server nobody runs is not refused because a silent subscriber listens
// on the relist subjects.
func TestRemoveWithRelistSnooper(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig(ServerConfig{Name: "old", URL: url}))
	rec := record(t, h.env, subjects.RegistryServer("old"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.stop(t)
	snoop(t, h.env)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := New(h.env.JS, h.env.NC, Config{}, testLogger(t)).Remove(ctx, "old"); err != nil {
		t.Fatalf("Remove with a silent relist subscriber: %v", err)
	}
	rec.wait(0, "removed", isStatus(subjects.StatusRemoved, ""))
}

// The probe of a stopping process (or of `servers remove`) is answered at once by a
// registrysync that runs the server, without re-listing it: a probe is no re-list request.
func TestServedElsewhereProbeListsNothing(t *testing.T) {
	t.Parallel()
	var lists atomic.Int64
	mcpHandler := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/list"`)) {
				lists.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	url := ts.URL + "/mcp"
	cfg := fastConfig(ServerConfig{Name: "twice", URL: url})
	a := run(t, nil, cfg)
	waitUntil(t, "a ready", func() bool { return a.m.Statuses()["twice"].Status == subjects.StatusReady })
	n := lists.Load()
	other := New(a.env.JS, a.env.NC, Config{}, testLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if !other.servedElsewhere(ctx, "twice") {
		t.Fatal("a running registrysync not found")
	}
	if got := lists.Load(); got != n {
		t.Errorf("the probe made the running process list the server (%d lists, want %d)", got, n)
	}
}

// A silent subscriber on the relist subjects costs each probe its whole timeout: a stopping
// process with more servers than its retire budget (5 s) has probes left published the first
// few connector_stopped and left the rest "ready" (until a watchdog declared them lost).
func TestStopWithRelistSnooperRetiresEveryServer(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	var scs []ServerConfig
	for i := range 8 {
		scs = append(scs, ServerConfig{Name: "svc" + strconv.Itoa(i), URL: url})
	}
	h := run(t, nil, fastConfig(scs...))
	rec := record(t, h.env, subjects.RegistryAll)
	waitUntil(t, "every server ready", h.m.Ready)
	from := lastSeq(t, h.env, subjects.RegistryAll)
	snoop(t, h.env)
	h.stop(t)
	for _, sc := range scs {
		rec.wait(from, sc.Name+" stopped", func(e event) bool {
			return e.subject.Server == sc.Name && isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped)(e)
		})
	}
}

// A server moved from registrysync A to B: A, stopping, found nobody answering for it (B not up
// yet) and its connector_stopped landed after B's "ready" (A's publish waited on JetStream). B
// runs the server, but the registry said it stopped — search hid its tools, executors refused its
// calls — until B's connection to it changed. B publishes its status again.
func TestLateConnectorStoppedOfAnotherProcessReclaimed(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "mv", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	b := run(t, nil, cfg)
	rec := record(t, b.env, subjects.RegistryServer("mv"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	st := *ready.ev.Status
	st.Status, st.Code, st.Reason, st.HeartbeatMs = subjects.StatusUnavailable, subjects.CodeConnectorStopped, "the registrysync that runs this server stopped", 0
	st.Connector = "A" // the process the server moved from
	data, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := b.env.JS.Publish(ctx, subjects.RegistryStatus("mv"), data); err != nil {
		t.Fatal(err)
	}
	stopped := rec.wait(ready.seq, "a's late connector_stopped", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped))
	rec.wait(stopped.seq, "ready again", isStatus(subjects.StatusReady, ""))
}

// Two processes ran one server (a move: B started before A stopped, or by mistake), and the one
// whose status was the last to land stopped: it rightly left the status to the other, but that
// status named the stopped process, whose heartbeats had ended — so every watchdog declared the
// server lost (connector_lost) while the other process ran it and beat, and search dropped its
// tools until that process reclaimed it. The process that answers the stopping one's probe
// publishes its own status, which names it.
func TestStopOfLaterProcessLeavesStatusNamingTheOther(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "twice", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	a := run(t, nil, cfg)
	rec := record(t, a.env, subjects.RegistryServer("twice"))
	rec.wait(0, "a ready", isStatus(subjects.StatusReady, ""))
	b := run(t, a.env, cfg)
	bReady := rec.wait(0, "b ready", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) && e.ev.Status.Connector == b.m.id
	})
	b.stop(t)
	rec.wait(bReady.seq, "a status naming a", func(e event) bool {
		return e.ev.Status != nil && e.ev.Status.Connector == a.m.id && e.ev.Status.Status == subjects.StatusReady && e.ev.Status.HeartbeatMs > 0
	})
	for _, e := range rec.all() {
		if e.seq > bReady.seq && e.ev.Status != nil && e.ev.Status.Status != subjects.StatusReady {
			t.Errorf("status after b stopped: %s", e)
		}
	}
}
