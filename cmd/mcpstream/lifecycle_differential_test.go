//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The lifecycle differential runs the three consumers of server status end to end — the
// registrysync role with real connectors (two demo servers as its stdio children, one over
// streamable HTTP served by the test) in a child process, two indexer replicas and an executor
// as role subcommands in this process, against one NATS — and applies random (seeded, bounded)
// lifecycle operations: a stdio child killed (SIGKILL); the HTTP server refusing or closing
// connections, then back (its tools changed meanwhile, sometimes); a server's tools changed at
// run time (list_changed), once or twice in a burst; `servers remove` of a stopped server
// (dropped from the configuration, or added again at once); registrysync stopped, or killed
// outright (its servers declared lost by a watchdog, or not yet), and started again; an indexer
// replica restarted (its directory kept or wiped); the executor restarted, also while
// registrysync is away with calls queued. A third of the operations are followed by the next
// at once. After the others it waits (bounded: lcHangBound) until the three agree and the
// servers are where the operation leaves them, else fails with the operations and the registry
// history. It checks: registrysync's view (`servers --json`, read from the registry stream) and
// the catalog's `servers` have the same status, reason and tool count for every server (the
// catalog lists no removed one); every tool's state in the catalog's details is what its
// server's status and its last list imply; a call of every tool gets the code that state
// implies (README "Calling tools": fresh or expired → it runs — here invalid_arguments, nothing
// runs —; stale, removed or revoked → stale; unavailable → unavailable, naming the status's
// code); every server that should be ready answers a real read-only call (nothing stays
// unavailable once its server is back); calls queued while registrysync was away are answered
// ok once it is back.
//
// TestLifecycleDifferential runs seeds 47 and 53 for 10 operations each (stdio kills, the HTTP
// server away, tools changed, every role restarted or killed, calls queued), about 18 s under
// -race;
// MCPSTREAM_LC_SEEDS=1,2,3 and MCPSTREAM_LC_OPS=12 run others (about 2–4 s an operation under
// -race, 17 s more for each watchdog declaration).

// lcServer is one server of the differential: its demo server, its transport and the tools it
// lists now (what the control file leaves).
type lcServer struct {
	name, demo string
	http       bool
	control    string
	hide, add  []string
	// removed: `servers remove` retracted it and no registrysync ran it since; dropped: it is
	// not in registrysync's configuration.
	removed, dropped bool
}

// tools returns the names it lists now.
func (s *lcServer) tools() []string {
	base := map[string][]string{"logging": {"getLogs", "getLogStats"}, "ticketing": {"closeIssue", "createIssue", "listIssues"}, "kb": {"get_document", "search_knowledge_base"}}[s.demo]
	out := slices.Clone(base)
	out = append(out, s.add...)
	out = slices.DeleteFunc(out, func(n string) bool { return slices.Contains(s.hide, n) })
	slices.Sort(out)
	return slices.Compact(out)
}

// allTools are every name it may ever list.
func (s *lcServer) allTools() []string {
	extra, _ := demoservers.ExtraTools(s.demo)
	return append((&lcServer{demo: s.demo}).tools(), extra...)
}

// lcProbe is a read-only call of each demo server (skipped while its tool is hidden).
var lcProbe = map[string]struct{ tool, args string }{
	"logging":   {"getLogStats", `{}`},
	"ticketing": {"listIssues", `{}`},
	"kb":        {"search_knowledge_base", `{"query":"refund"}`},
}

// lcRig is the running system of a lifecycle differential, and what the test did to it.
type lcRig struct {
	t       *testing.T
	env     *natstest.Env
	dir     string
	servers []*lcServer
	rs      *lcProc
	ex      *upProcess
	ix      [2]*upProcess
	ixData  [2]string
	// quick: the current operation is not settled (the next one follows at once).
	quick   bool
	kbAddr  string
	kbStop  context.CancelFunc
	kbDone  chan error
	kbDown  net.Listener // while the HTTP server is down in "close" mode: accepts and closes
	history []string
	calls   executor.Client
	cat     indexer.Client
}

func (r *lcRig) logf(format string, args ...any) {
	r.history = append(r.history, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (r *lcRig) server(name string) *lcServer {
	for _, s := range r.servers {
		if s.name == name {
			return s
		}
	}
	r.t.Fatalf("no server %s", name)
	return nil
}

// config writes the configuration registrysync runs with (every server not removed).
func (r *lcRig) config() string {
	exe, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("servers:\n")
	for _, s := range r.servers {
		if s.dropped {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n", s.name)
		if s.http {
			fmt.Fprintf(&b, "    url: http://%s/mcp\n", r.kbAddr)
			continue
		}
		fmt.Fprintf(&b, "    command: %q\n    args: [\"demo-server\", %q, \"--control\", %q, \"--control-interval\", \"50ms\", \"--logs\", \"200\"]\n", exe, s.demo, s.control)
		b.WriteString("    env: {GORACE: \"atexit_sleep_ms=0\"}\n")
	}
	path := filepath.Join(r.dir, "mcpstream.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// startRole runs a role subcommand in this process until stopped.
func (r *lcRig) startRole(what string, args ...string) *upProcess {
	r.t.Helper()
	p := &upProcess{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	args = append(args, "--nats", r.env.URL, "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	go func() { p.done <- run(ctx, args, p.out, p.errOut) }()
	p.nats, p.http = waitStartLine(r.t, what, 600, p.out, p.errOut, p.done)
	waitFor(r.t, what+" /healthz 200", 1200, func() bool { code, _ := p.healthz(r.t); return code == http.StatusOK })
	r.logf("started %s", what)
	return p
}

func (r *lcRig) stopRole(what string, p *upProcess) {
	r.t.Helper()
	if err := p.stop(r.t); err != nil {
		r.t.Fatalf("%s did not stop cleanly: %v\n%s", what, err, p.errOut.String())
	}
	r.logf("stopped %s", what)
}

// startRS runs the registrysync role as a child process (so that it can be killed outright),
// with every server but those dropped from the configuration.
func (r *lcRig) startRS() {
	r.t.Helper()
	p := &lcProc{out: &lockedBuffer{}, errOut: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "registrysync", "--config", r.config(), "--data", filepath.Join(r.dir, "rs"),
		"--nats", r.env.URL, "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	p.cmd.Env = append(os.Environ(), envTestMain+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errOut
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	waitStartLine(r.t, "registrysync", 1200, p.out, p.errOut, p.done)
	r.rs = p
	for _, s := range r.servers {
		if !s.dropped {
			s.removed = false
		}
	}
	r.logf("started registrysync (pid %d)", p.cmd.Process.Pid)
}

// lcProc is the registrysync role in a child process.
type lcProc struct {
	cmd         *exec.Cmd
	out, errOut *lockedBuffer
	done        chan error
}

// stopRS interrupts registrysync (or kills it outright) and waits for it.
func (r *lcRig) stopRS(kill bool) {
	r.t.Helper()
	sig := os.Interrupt
	if kill {
		sig = os.Kill
	}
	r.rs.cmd.Process.Signal(sig)
	select {
	case err := <-r.rs.done:
		r.rs.done <- err
		if err != nil && !kill {
			r.t.Fatalf("registrysync did not stop cleanly: %v\n%s", err, r.rs.errOut)
		}
	case <-time.After(40 * time.Second):
		r.t.Fatalf("registrysync still running 40s after %v", sig)
	}
	r.logf("stopped registrysync (killed: %v)", kill)
}

// startIX starts indexer replica i (0 or 1), each in a directory of its own.
func (r *lcRig) startIX(i int) {
	r.ix[i] = r.startRole(fmt.Sprintf("indexer %d", i), "indexer", "--data", r.ixData[i], "--replica", fmt.Sprint(i))
}

// restartIX restarts replica i, its directory kept or wiped (rebuilt by replay).
func (r *lcRig) restartIX(rng *rand.Rand, i int) {
	r.stopRole(fmt.Sprintf("indexer %d", i), r.ix[i])
	if rng.IntN(2) == 0 {
		os.RemoveAll(r.ixData[i])
		r.logf("indexer %d data wiped", i)
	}
	r.startIX(i)
}

func (r *lcRig) startEX() {
	r.ex = r.startRole("executor", "executor", "--data", filepath.Join(r.dir, "ex"), "--workers", "8")
}

// kbUp serves the HTTP demo server on r.kbAddr (the same port each time).
func (r *lcRig) kbUp() {
	r.t.Helper()
	if r.kbDown != nil {
		r.kbDown.Close()
		r.kbDown = nil
	}
	var ln net.Listener
	var err error
	for i := 0; ; i++ {
		ln, err = net.Listen("tcp", r.kbAddr)
		if err == nil {
			break
		}
		if i == 100 {
			r.t.Fatalf("listen %s again: %v", r.kbAddr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.kbAddr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	r.kbStop = cancel
	r.kbDone = make(chan error, 1)
	s := r.server("kb")
	go func() {
		r.kbDone <- demoservers.ServeHTTPListener(ctx, "kb", demoservers.Options{ControlFile: s.control, ControlInterval: 50 * time.Millisecond, ErrorLog: discard{}}, ln)
	}()
	r.logf("kb http up on %s", r.kbAddr)
}

// kbOff stops the HTTP demo server; with closeConns its port then accepts connections and
// closes them at once, else nothing listens (refused).
func (r *lcRig) kbOff(closeConns bool) {
	r.t.Helper()
	r.kbStop()
	if err := <-r.kbDone; err != nil {
		r.t.Errorf("kb http: %v", err)
	}
	r.kbStop = nil
	if closeConns {
		ln, err := net.Listen("tcp", r.kbAddr)
		if err != nil {
			r.t.Fatalf("listen %s: %v", r.kbAddr, err)
		}
		r.kbDown = ln
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	r.logf("kb http down (close connections: %v)", closeConns)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// setTools writes s's control file for its current hide and add.
func (r *lcRig) setTools(s *lcServer) {
	r.t.Helper()
	data, _ := json.Marshal(demoservers.Control{Hide: s.hide, Add: s.add})
	tmp := s.control + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, s.control); err != nil {
		r.t.Fatal(err)
	}
	r.logf("%s tools now %v", s.name, s.tools())
}

// randomTools changes s's tools at random.
func (r *lcRig) randomTools(rng *rand.Rand, s *lcServer) {
	extra, _ := demoservers.ExtraTools(s.demo)
	s.add = subset(rng, extra, 0.5)
	s.hide = subset(rng, (&lcServer{demo: s.demo}).tools(), 0.3)
	r.setTools(s)
}

// observation is what the three consumers say at one time.
type observation struct {
	rs      map[string]serverRow
	catalog map[string]subjects.ServerSummary
	state   map[string]string // public name → catalog details state, "not_found" or "not_found/removed"
	code    map[string]string // public name → executor's answer to a call with bad arguments
	message map[string]string // and its message
}

func (o observation) String() string {
	var b strings.Builder
	for _, n := range lcKeys(o.rs) {
		row := o.rs[n]
		fmt.Fprintf(&b, "  registrysync %s: %s %s %q tools %d\n", n, row.Status, row.Code, row.Reason, row.Tools)
	}
	for _, n := range lcKeys(o.catalog) {
		row := o.catalog[n]
		fmt.Fprintf(&b, "  catalog %s: %s %q tools %d\n", n, row.Status, row.Reason, row.Tools)
	}
	for _, n := range lcKeys(o.state) {
		fmt.Fprintf(&b, "  %s: catalog %s, executor %s %q\n", n, o.state[n], o.code[n], o.message[n])
	}
	return b.String()
}

func lcKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *lcRig) observe(ctx context.Context) (observation, error) {
	o := observation{rs: map[string]serverRow{}, catalog: map[string]subjects.ServerSummary{}, state: map[string]string{}, code: map[string]string{}, message: map[string]string{}}
	out, errOut, err := runCmd(r.t, ctx, "servers", "--json", "--nats", r.env.URL)
	if err != nil {
		return o, fmt.Errorf("servers --json: %v %s", err, errOut)
	}
	var rows []serverRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return o, err
	}
	for _, row := range rows {
		o.rs[row.Name] = row
	}
	rep, err := r.cat.AllServers(ctx, "local", subjects.ServersRequest{V: 1}, 10)
	if err != nil || rep.Error != nil {
		return o, fmt.Errorf("catalog servers: %v %+v", err, rep.Error)
	}
	for _, s := range rep.Servers {
		o.catalog[s.Name] = s
	}
	var names []string
	for _, s := range r.servers {
		for _, tool := range s.allTools() {
			names = append(names, subjects.PublicName(s.name, tool))
		}
	}
	det, err := r.cat.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: names})
	if err != nil {
		return o, fmt.Errorf("catalog details: %v", err)
	}
	for _, n := range names {
		o.state[n] = subjects.CodeNotFound
	}
	for _, d := range det.Tools {
		o.state[d.Name] = d.State
		if d.State == "" {
			o.state[d.Name] = subjects.StateFresh
		}
	}
	if det.Error != nil && det.Error.Code != subjects.CodeNotFound {
		return o, fmt.Errorf("catalog details: %+v", det.Error)
	}
	for _, n := range names {
		if o.state[n] != subjects.CodeNotFound {
			continue
		}
		one, err := r.cat.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: []string{n}})
		if err != nil {
			return o, err
		}
		if one.Error != nil && one.Error.Reason == subjects.StateRemoved {
			o.state[n] = subjects.CodeNotFound + "/" + subjects.StateRemoved
		}
	}
	for _, n := range names {
		res, err := r.call(ctx, n, `{"zz_not_an_argument":1}`, 400) // short: an executor's first 30 s wait for servers coming back
		if err != nil {
			return o, fmt.Errorf("call %s: %v", n, err)
		}
		o.code[n] = "ok"
		if res.Error != nil {
			o.code[n], o.message[n] = res.Error.Code, res.Error.Message
		}
	}
	return o, nil
}

func (r *lcRig) call(ctx context.Context, tool, args string, timeoutMs int64) (subjects.CallResult, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return r.calls.Call(cctx, "local", subjects.CallRequest{V: 1, ID: fmt.Sprintf("lc-%d", rand.Int64()), Tool: tool,
		Arguments: json.RawMessage(args), TimeoutMs: timeoutMs, ApprovalTimeoutMs: -1})
}

// implied is the executor's code for a call with bad arguments of a tool in catalog state st.
func implied(st string) string {
	switch st {
	case subjects.StateFresh, "expired":
		return subjects.CodeInvalidArguments
	case subjects.StateStale, subjects.StateRevoked, subjects.CodeNotFound + "/" + subjects.StateRemoved:
		return subjects.CodeStale
	case subjects.StateUnavailable:
		return subjects.CodeUnavailable
	}
	return subjects.CodeNotFound
}

// disagreements lists where o's three views disagree with each other, and (want) with where
// the servers should be: "ready", "removed" or "unavailable".
func (r *lcRig) disagreements(o observation, want map[string]string) (out []string) {
	for _, s := range r.servers {
		rs, inRS := o.rs[s.name]
		cat, inCat := o.catalog[s.name]
		// The catalog lists no removed server (README: dropped from every catalog).
		if !inRS || inCat == (rs.Status == subjects.StatusRemoved) {
			out = append(out, fmt.Sprintf("%s: in registrysync's view %v (%s), in the catalog %v", s.name, inRS, rs.Status, inCat))
			continue
		}
		if inCat && (rs.Status != cat.Status || rs.Tools != cat.Tools || rs.Reason != cat.Reason) {
			out = append(out, fmt.Sprintf("%s: registrysync %s (%d tools), catalog %s (%d tools)", s.name, rs.Status, rs.Tools, cat.Status, cat.Tools))
		}
		if w := want[s.name]; w != "" && rs.Status != w {
			out = append(out, fmt.Sprintf("%s: %s, want %s", s.name, rs.Status, w))
		}
		listed := s.tools()
		unavailable := 0
		if rs.Status == subjects.StatusUnavailable {
			defer func() {
				if unavailable != rs.Tools {
					out = append(out, fmt.Sprintf("%s: unavailable with %d tools, %d of them unavailable in the catalog", s.name, rs.Tools, unavailable))
				}
			}()
		}
		if rs.Status == subjects.StatusReady && rs.Tools != len(listed) {
			out = append(out, fmt.Sprintf("%s: ready with %d tools, it lists %d %v", s.name, rs.Tools, len(listed), listed))
		}
		for _, tool := range s.allTools() {
			n := subjects.PublicName(s.name, tool)
			st, code := o.state[n], o.code[n]
			if implied(st) != code {
				out = append(out, fmt.Sprintf("%s: catalog %s, executor %s (want %s)", n, st, code, implied(st)))
			}
			if code == subjects.CodeUnavailable && rs.Code != "" && !strings.Contains(o.message[n], "("+rs.Code+")") {
				out = append(out, fmt.Sprintf("%s: server %s (%s), the executor says %q", n, rs.Status, rs.Code, o.message[n]))
			}
			var wantSt string
			switch {
			case rs.Status == subjects.StatusRemoved:
				wantSt = subjects.CodeNotFound + "/" + subjects.StateRemoved
				if !slices.Contains(s.allTools(), tool) {
					wantSt = subjects.CodeNotFound
				}
			case rs.Status == subjects.StatusReady && slices.Contains(listed, tool):
				wantSt = subjects.StateFresh
				if st == "expired" {
					wantSt = "expired"
				}
			case rs.Status == subjects.StatusUnavailable:
				// Its tools are those of its last lists, which may not be what its control
				// file says now (changed while nothing ran it): counted below.
				if st == subjects.StateUnavailable {
					unavailable++
				} else if !strings.HasPrefix(st, subjects.CodeNotFound) {
					out = append(out, fmt.Sprintf("%s: server unavailable, catalog state %s", n, st))
				}
				continue
			}
			if wantSt == "" {
				// not listed now: not_found, or removed when an earlier list had it
				if st != subjects.CodeNotFound && st != subjects.CodeNotFound+"/"+subjects.StateRemoved {
					out = append(out, fmt.Sprintf("%s: not listed by %s (%s), catalog %s", n, s.name, rs.Status, st))
				}
				continue
			}
			if st != wantSt && !(rs.Status == subjects.StatusRemoved && strings.HasPrefix(st, subjects.CodeNotFound)) {
				out = append(out, fmt.Sprintf("%s: server %s, catalog state %s, want %s", n, rs.Status, st, wantSt))
			}
		}
	}
	return out
}

// settle polls until the three agree and the servers are where want says (bounded), then
// checks that every ready server answers a real call.
func (r *lcRig) settle(what string, want map[string]string) {
	r.t.Helper()
	if r.quick {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deadline := time.Now().Add(lcHangBound)
	var o observation
	var diffs []string
	for {
		var err error
		o, err = r.observe(ctx)
		if err == nil {
			diffs = r.disagreements(o, want)
		} else {
			diffs = []string{err.Error()}
		}
		if len(diffs) == 0 {
			// Every server that should be ready answers a real call.
			for _, s := range r.servers {
				p := lcProbe[s.demo]
				if want[s.name] != subjects.StatusReady || slices.Contains(s.hide, p.tool) {
					continue
				}
				n := subjects.PublicName(s.name, p.tool)
				res, err := r.call(ctx, n, p.args, 5000)
				if err != nil || res.Status != "ok" {
					diffs = append(diffs, fmt.Sprintf("%s is ready, a call of %s answers %v %s %+v", s.name, n, err, res.Status, res.Error))
				}
			}
		}
		if len(diffs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.fail(what, o, diffs)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.logf("settled after %s", what)
}

// lastSeq is the registry stream's last sequence.
func (r *lcRig) lastSeq() uint64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.LastSeq
}

// awaitStatus waits until the registry holds a status of server after seq that pred accepts:
// the operation's effect was seen (its server noticed down), so that settling does not end
// on the state before it.
func (r *lcRig) awaitStatus(server string, after uint64, what string, pred func(*subjects.Status) bool) {
	r.t.Helper()
	if r.quick {
		return
	}
	deadline := time.Now().Add(lcHangBound)
	for {
		for _, ev := range (&upProcess{nats: r.env.URL}).events(r.t, "--server", server) {
			if ev.Seq > after && ev.Event.Status != nil && pred(ev.Event.Status) {
				r.logf("seen %s: %s %s (seq %d)", server, ev.Event.Status.Status, ev.Event.Status.Code, ev.Seq)
				return
			}
		}
		if time.Now().After(deadline) {
			r.fail(what, observation{}, []string{"no status of " + server + " says so"})
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *lcRig) fail(what string, o observation, diffs []string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	evs, errOut, _ := runCmd(r.t, ctx, "events", "--nats", r.env.URL)
	rsErr := ""
	if r.rs != nil {
		rsErr = r.rs.errOut.String()
	}
	r.t.Fatalf("after %s: no agreement within %s:\n  %s\nlast observation:\n%s\noperations:\n  %s\nregistry events:\n%s%s\nregistrysync stderr:\n%s",
		what, lcHangBound, strings.Join(diffs, "\n  "), o, strings.Join(r.history, "\n  "), evs, errOut, rsErr)
}

// lcHangBound bounds each wait for agreement: generous, since a connector may back off.
const lcHangBound = 30 * time.Second

func newLCRig(t *testing.T) *lcRig {
	r := &lcRig{t: t, env: natstest.Start(t), dir: t.TempDir()}
	r.ixData = [2]string{filepath.Join(r.dir, "ix0"), filepath.Join(r.dir, "ix1")}
	r.calls = executor.Client{NC: r.env.NC, JS: r.env.JS}
	r.cat = indexer.Client{NC: r.env.NC, Timeout: 10 * time.Second}
	for _, s := range []*lcServer{{name: "logs", demo: "logging"}, {name: "tix", demo: "ticketing"}, {name: "kb", demo: "kb", http: true}} {
		s.control = filepath.Join(r.dir, s.name+".control.json")
		r.servers = append(r.servers, s)
	}
	r.kbAddr = "127.0.0.1:0"
	r.kbUp()
	r.startIX(0)
	r.startIX(1)
	r.startEX()
	r.startRS()
	t.Cleanup(func() {
		if r.rs != nil {
			r.rs.cmd.Process.Signal(os.Interrupt)
			select {
			case <-r.rs.done:
			case <-time.After(30 * time.Second):
				r.rs.cmd.Process.Kill()
				<-r.rs.done
			}
		}
		for _, p := range []*upProcess{r.ex, r.ix[0], r.ix[1]} {
			if p != nil {
				p.stop(t)
			}
		}
		if r.kbStop != nil {
			r.kbStop()
			<-r.kbDone
		}
		if r.kbDown != nil {
			r.kbDown.Close()
		}
	})
	return r
}

// allReady is the want of settle where every server not removed is ready.
func (r *lcRig) allReady() map[string]string {
	want := map[string]string{}
	for _, s := range r.servers {
		want[s.name] = subjects.StatusReady
		if s.removed {
			want[s.name] = subjects.StatusRemoved
		}
	}
	return want
}

// stdioChild returns the pid of s's demo server process (told by its control file).
func stdioChild(t *testing.T, s *lcServer) int {
	t.Helper()
	var pid int
	waitFor(t, "the "+s.name+" demo server process", 200, func() bool {
		for _, pr := range processes() {
			if slices.Contains(pr.args, "demo-server") && slices.Contains(pr.args, s.control) {
				pid = pr.pid
				return true
			}
		}
		return false
	})
	return pid
}

// killChild SIGKILLs s's stdio demo server (op i), runs meanwhile (nil: nothing) right after
// the kill, and waits for the status that says the connection was lost.
func (r *lcRig) killChild(t *testing.T, s *lcServer, i int, meanwhile func()) {
	t.Helper()
	pid := stdioChild(t, s)
	r.logf("SIGKILL %s (pid %d)", s.name, pid)
	seq := r.lastSeq()
	syscall.Kill(pid, syscall.SIGKILL)
	if meanwhile != nil {
		meanwhile()
	}
	r.awaitStatus(s.name, seq, fmt.Sprintf("op %d: kill %s", i, s.name), lost)
}

// runLifecycle applies ops random operations of seed.
func runLifecycle(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	r := newLCRig(t)
	t.Cleanup(func() { t.Logf("operations:\n  %s", strings.Join(r.history, "\n  ")) })
	r.settle("start", r.allReady())
	for i := range ops {
		// Some operations follow the one before at once (its effect maybe half seen); the
		// last one settles.
		r.quick = i < ops-1 && rng.IntN(3) == 0
		if r.quick {
			r.logf("op %d: the next operation follows at once", i)
		}
		switch op := rng.IntN(15); op {
		case 0: // kill a stdio child
			s := r.servers[rng.IntN(2)]
			if s.dropped {
				continue // no process runs it
			}
			r.killChild(t, s, i, nil)
			r.settle(fmt.Sprintf("op %d: kill %s", i, s.name), r.allReady())
		case 1: // the HTTP server away, then back
			closeConns := rng.IntN(2) == 0
			r.kbOff(closeConns)
			if rng.IntN(2) == 0 {
				want := r.allReady()
				want["kb"] = subjects.StatusUnavailable
				r.settle(fmt.Sprintf("op %d: kb down", i), want)
			} else {
				time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
			}
			r.kbUp()
			r.settle(fmt.Sprintf("op %d: kb back", i), r.allReady())
		case 2, 3: // tools changed at run time
			s := r.servers[rng.IntN(len(r.servers))]
			r.randomTools(rng, s)
			r.settle(fmt.Sprintf("op %d: %s tools changed", i, s.name), r.allReady())
		case 4: // registrysync stopped (a server removed meanwhile, sometimes), started again
			r.stopRS(false)
			want := map[string]string{}
			for _, s := range r.servers {
				want[s.name] = subjects.StatusUnavailable
			}
			if rng.IntN(2) == 0 {
				s := r.servers[rng.IntN(len(r.servers))]
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				out, errOut, err := runCmd(t, ctx, "servers", "remove", s.name, "--nats", r.env.URL)
				cancel()
				if err != nil {
					t.Fatalf("servers remove %s: %v %s %s", s.name, err, out, errOut)
				}
				s.removed = true
				s.dropped = rng.IntN(2) == 0 // until a restart adds it again
				want[s.name] = subjects.StatusRemoved
				r.logf("removed %s (dropped from the configuration: %v)", s.name, s.dropped)
			}
			r.settle(fmt.Sprintf("op %d: registrysync stopped", i), want)
			r.startRS()
			r.settle(fmt.Sprintf("op %d: registrysync started", i), r.allReady())
		case 5: // an indexer replica restarted (its directory kept or wiped)
			r.restartIX(rng, rng.IntN(2))
			r.settle(fmt.Sprintf("op %d: indexer restarted", i), r.allReady())
		case 6: // the executor restarted
			r.stopRole("executor", r.ex)
			r.startEX()
			r.settle(fmt.Sprintf("op %d: executor restarted", i), r.allReady())
		case 7: // registrysync restarted at once (every server in its configuration again)
			r.stopRS(false)
			for _, s := range r.servers {
				s.dropped = false
			}
			r.startRS()
			r.settle(fmt.Sprintf("op %d: registrysync restarted", i), r.allReady())
		case 8: // while registrysync is stopped: tools changed, the executor or the indexer restarted
			r.stopRS(false)
			r.randomTools(rng, r.servers[rng.IntN(len(r.servers))])
			if rng.IntN(2) == 0 {
				r.stopRole("executor", r.ex)
				r.startEX()
			}
			if rng.IntN(2) == 0 {
				r.restartIX(rng, rng.IntN(2))
			}
			if rng.IntN(2) == 0 {
				want := map[string]string{}
				for _, s := range r.servers {
					want[s.name] = subjects.StatusUnavailable
				}
				r.settle(fmt.Sprintf("op %d: registrysync stopped", i), want)
			}
			r.startRS()
			r.settle(fmt.Sprintf("op %d: registrysync started", i), r.allReady())
		case 9: // the HTTP server away, its tools changed meanwhile, back
			r.kbOff(rng.IntN(2) == 0)
			r.randomTools(rng, r.server("kb"))
			time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
			r.kbUp()
			r.settle(fmt.Sprintf("op %d: kb back with other tools", i), r.allReady())
		case 10: // a stdio child killed and its tools changed at once
			s := r.servers[rng.IntN(2)]
			if s.dropped {
				continue // no process runs it
			}
			r.killChild(t, s, i, func() { r.randomTools(rng, s) })
			r.settle(fmt.Sprintf("op %d: kill %s, tools changed", i, s.name), r.allReady())
		case 12: // registrysync killed outright, started again at once
			r.stopRS(true)
			r.startRS()
			r.settle(fmt.Sprintf("op %d: registrysync killed and started", i), r.allReady())
		case 13: // registrysync killed outright: its servers declared lost, then it starts again
			// The servers it claimed (a status other than unavailable: one it started and
			// was killed before its first status is still connector_stopped, unclaimed).
			claimed := map[string]bool{}
			for _, row := range (&upProcess{nats: r.env.URL}).servers(t) {
				claimed[row.Name] = row.Status != subjects.StatusUnavailable && row.Status != subjects.StatusRemoved
			}
			seq := r.lastSeq()
			r.stopRS(true)
			if rng.IntN(2) == 0 { // a watchdog restarted meanwhile
				r.restartIX(rng, rng.IntN(2))
			}
			for _, s := range r.servers {
				if claimed[s.name] {
					r.awaitStatus(s.name, seq, fmt.Sprintf("op %d: registrysync killed", i), func(st *subjects.Status) bool {
						return st.Status == subjects.StatusUnavailable && st.Code == subjects.CodeConnectorLost
					})
				}
			}
			want := r.allReady()
			for n, w := range want {
				if w == subjects.StatusReady {
					want[n] = subjects.StatusUnavailable
				}
			}
			r.settle(fmt.Sprintf("op %d: registrysync killed", i), want)
			r.startRS()
			r.settle(fmt.Sprintf("op %d: registrysync started after its kill", i), r.allReady())
		case 14: // calls queued while registrysync is away run once it is back (executor restarted)
			kill := rng.IntN(2) == 0
			r.stopRS(kill)
			r.stopRole("executor", r.ex)
			r.startEX()
			type answer struct {
				tool string
				res  subjects.CallResult
				err  error
			}
			answers := make(chan answer, len(r.servers))
			queued := 0
			for _, s := range r.servers {
				p := lcProbe[s.demo]
				if s.removed || s.dropped || slices.Contains(s.hide, p.tool) {
					continue
				}
				n := subjects.PublicName(s.name, p.tool)
				queued++
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					res, err := r.calls.Call(ctx, "local", subjects.CallRequest{V: 1, ID: fmt.Sprintf("q-%d", rand.Int64()), Tool: n,
						Arguments: json.RawMessage(p.args), TimeoutMs: 20000, ApprovalTimeoutMs: -1})
					answers <- answer{n, res, err}
				}()
			}
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
			r.logf("%d calls queued", queued)
			r.startRS()
			for range queued {
				a := <-answers
				if a.err != nil || a.res.Status != "ok" {
					r.fail(fmt.Sprintf("op %d: calls queued across a registrysync restart (killed: %v)", i, kill), observation{},
						[]string{fmt.Sprintf("queued call of %s: %v %s %+v", a.tool, a.err, a.res.Status, a.res.Error)})
				}
			}
			r.settle(fmt.Sprintf("op %d: queued calls answered", i), r.allReady())
		case 11: // tools changed twice in a burst
			s := r.servers[rng.IntN(len(r.servers))]
			r.randomTools(rng, s)
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
			r.randomTools(rng, s)
			r.settle(fmt.Sprintf("op %d: %s tools changed twice", i, s.name), r.allReady())
		}
	}
}

// lost accepts a status saying the connection to a server was lost (or, killed in its
// handshake, could not be made).
func lost(st *subjects.Status) bool {
	return st.Status == subjects.StatusUnavailable && (st.Code == subjects.CodeConnectionLost || st.Code == subjects.CodeConnectFailed)
}

func subset[T any](rng *rand.Rand, from []T, p float64) []T {
	var out []T
	for _, x := range from {
		if rng.Float64() < p {
			out = append(out, x)
		}
	}
	return out
}

func TestLifecycleDifferential(t *testing.T) {
	seeds := []uint64{47, 53}
	if s := os.Getenv("MCPSTREAM_LC_SEEDS"); s != "" {
		seeds = nil
		for _, f := range strings.Split(s, ",") {
			var n uint64
			fmt.Sscan(f, &n)
			seeds = append(seeds, n)
		}
	}
	ops := 10
	if s := os.Getenv("MCPSTREAM_LC_OPS"); s != "" {
		fmt.Sscan(s, &ops)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runLifecycle(t, seed, ops) })
	}
}
