package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// upProcess is `mcpstream up` running in-process on free loopback ports.
type upProcess struct {
	nats, http, data string
	out, errOut      *syncBuffer
	cancel           context.CancelFunc
	done             chan error
}

var startLine = regexp.MustCompile(`NATS (nats://\S+), HTTP (http://\S+) `)

// waitStartLine waits (at most limit polls) for the start line of a process (up or a role) on
// out and returns the NATS and HTTP addresses it prints; the process exiting meanwhile (on done,
// which keeps the result for others to read) fails the test with its stderr.
func waitStartLine(t *testing.T, what string, limit int, out, errOut fmt.Stringer, done chan error) (natsURL, httpURL string) {
	t.Helper()
	waitFor(t, what+"'s start line", limit, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("%s exited: %v\n%s", what, err, errOut.String())
		default:
		}
		m := startLine.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		natsURL, httpURL = m[1], m[2]
		return true
	})
	return natsURL, httpURL
}

// startUp runs up with the demo servers; cleanup stops it and checks it stopped cleanly.
func startUp(t *testing.T, extra ...string) *upProcess {
	t.Helper()
	p := &upProcess{data: t.TempDir(), out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	args := []string{"up", "--data", p.data, "--http-listen", "127.0.0.1:0"}
	if !slices.Contains(extra, "--nats") { // --nats-listen is the embedded server's: a usage error with --nats
		args = append(args, "--nats-listen", "127.0.0.1:0")
	}
	args = append(args, extra...)
	go func() { p.done <- run(ctx, args, p.out, p.errOut) }()
	t.Cleanup(func() {
		if err := p.stop(t); err != nil {
			t.Errorf("up did not stop cleanly: %v", err)
		}
	})
	p.nats, p.http = waitStartLine(t, "up", 600, p.out, p.errOut, p.done)
	return p
}

// metrics returns the text of GET /metrics (status 200 required).
func (p *upProcess) metrics(t *testing.T) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(p.http + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// stop interrupts up and waits for it (bounded).
func (p *upProcess) stop(t *testing.T) error {
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(40 * time.Second):
		return fmt.Errorf("up still running 40s after interrupt\n%s", p.errOut.String())
	}
}

func (p *upProcess) healthz(t *testing.T) (int, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.http + "/healthz")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func (p *upProcess) servers(t *testing.T) []serverRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, errOut, err := runCmd(t, ctx, "servers", "--json", "--nats", p.nats)
	if err != nil {
		t.Fatalf("servers --json: %v\n%s", err, errOut)
	}
	var rows []serverRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("servers --json is not a JSON array: %v\n%s", err, out)
	}
	return rows
}

// waitDemoReady waits until the three demo servers are ready with their tools listed, and
// returns the servers' rows then.
func (p *upProcess) waitDemoReady(t *testing.T) []serverRow {
	t.Helper()
	var rows []serverRow
	waitFor(t, "3 demo servers ready", 400, func() bool {
		rows = p.servers(t)
		ready := 0
		for _, r := range rows {
			if r.Status == subjects.StatusReady && r.Tools > 0 {
				ready++
			}
		}
		return ready == 3
	})
	return rows
}

// registryEvent is one `events --json` line, decoded.
type registryEvent struct {
	Seq     uint64
	Subject string
	Event   subjects.RegistryEvent
}

func (p *upProcess) events(t *testing.T, args ...string) []registryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, errOut, err := runCmd(t, ctx, append([]string{"events", "--json", "--nats", p.nats}, args...)...)
	if err != nil {
		t.Fatalf("events --json: %v\n%s", err, errOut)
	}
	var evs []registryEvent
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var l eventLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("events line is not JSON: %v: %s", err, line)
		}
		ev, err := subjects.DecodeRegistry(l.Event)
		if err != nil {
			t.Fatalf("events line %d: %v", l.Seq, err)
		}
		evs = append(evs, registryEvent{Seq: l.Seq, Subject: l.Subject, Event: ev})
	}
	return evs
}

// lastSnapshot returns the last tools snapshot of server among evs and the names of its tools.
func lastSnapshot(evs []registryEvent, server string) (uint64, []string) {
	for i := len(evs) - 1; i >= 0; i-- {
		if s := evs[i].Event.Snapshot; s != nil && s.Server == server && s.Kind == subjects.KindTools {
			return evs[i].Seq, itemNames(s.Items)
		}
	}
	return 0, nil
}

func TestUpEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts up with three demo server processes (run without -short)")
	}
	p := startUp(t)

	// Health: 200 once every role runs.
	waitFor(t, "/healthz 200", 1200, func() bool { code, _ := p.healthz(t); return code == http.StatusOK })
	_, body := p.healthz(t)
	if body["status"] != "ok" {
		t.Errorf("/healthz body = %v", body)
	}

	// servers --json: the three demo servers, ready, with tools.
	want := []string{"kb", "logging", "ticketing"}
	var rows []serverRow
	rows = p.waitDemoReady(t)
	t.Logf("servers: %+v", rows)
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("servers = %v, want %v", names, want)
	}

	// events --json --since 1h: a tools snapshot per server.
	evs := p.events(t, "--since", "1h")
	for _, s := range want {
		if seq, tools := lastSnapshot(evs, s); seq == 0 || len(tools) == 0 {
			t.Errorf("no tools snapshot of %s in events", s)
		}
	}
	_, before := lastSnapshot(evs, "ticketing")
	if !slices.Contains(before, "listIssues") || slices.Contains(before, "assignIssue") {
		t.Fatalf("ticketing tools before the control file = %v", before)
	}

	// Change ticketing's tools at run time: list_changed, then a new snapshot with the difference.
	control := demoControlFile(p.data, "ticketing")
	tmp := control + ".tmp"
	if err := os.WriteFile(tmp, []byte(`{"hide":["listIssues"],"add":["assignIssue"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, control); err != nil {
		t.Fatal(err)
	}
	var snapSeq uint64
	var after []string
	waitFor(t, "a ticketing snapshot without listIssues and with assignIssue", 400, func() bool {
		evs = p.events(t, "--server", "ticketing")
		snapSeq, after = lastSnapshot(evs, "ticketing")
		return slices.Contains(after, "assignIssue") && !slices.Contains(after, "listIssues")
	})
	t.Logf("ticketing tools: before %v, after %v (snapshot seq %d)", before, after, snapSeq)
	changedBefore := false
	for _, e := range evs {
		if e.Event.ListChanged != nil && e.Event.ListChanged.Kind == subjects.KindTools && e.Seq < snapSeq {
			changedBefore = true
		}
	}
	if !changedBefore {
		t.Errorf("no changed event before the new ticketing snapshot (seq %d)", snapSeq)
	}
	// The text form shows the difference.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	text, _, err := runCmd(t, ctx, "events", "--server", "ticketing", "--nats", p.nats)
	if err != nil || !strings.Contains(text, "+assignIssue -listIssues") {
		t.Errorf("events text lacks the diff: %v\n%s", err, text)
	}

	// Kill the kb server's process: kb goes unavailable, then ready again; the others stay ready.
	lastSeq := evs[len(evs)-1].Seq
	all := p.events(t)
	lastSeq = max(lastSeq, all[len(all)-1].Seq)
	pid := demoChild(t, "kb")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill kb (pid %d): %v", pid, err)
	}
	var seen []string
	waitFor(t, "kb unavailable then ready", 600, func() bool {
		seen = seen[:0]
		for _, e := range p.events(t, "--server", "kb") {
			if s := e.Event.Status; s != nil && e.Seq > lastSeq {
				seen = append(seen, s.Status)
			}
		}
		i := slices.Index(seen, subjects.StatusUnavailable)
		return i >= 0 && slices.Contains(seen[i:], subjects.StatusReady)
	})
	t.Logf("kb statuses after the kill: %v", seen)
	for _, e := range p.events(t, "--subject", "registry.*.status") {
		if s := e.Event.Status; e.Seq > lastSeq && s.Server != "kb" {
			t.Errorf("%s changed status to %s after kb was killed", s.Server, s.Status)
		}
	}
	waitFor(t, "kb ready in servers", 200, func() bool {
		for _, r := range p.servers(t) {
			if r.Name == "kb" {
				return r.Status == subjects.StatusReady && r.Tools > 0
			}
		}
		return false
	})

	// Ctrl-C: everything stops, demo server processes too.
	if err := p.stop(t); err != nil {
		t.Fatalf("up: %v", err)
	}
	waitFor(t, "demo server processes to exit", 200, func() bool { return len(demoChildren(t)) == 0 })
	if code, _ := p.healthz(t); code != 0 {
		t.Errorf("/healthz still answers %d after stop", code)
	}
}

// demoChildren returns the pids of this process's children running `demo-server NAME`, by name.
func demoChildren(t *testing.T) map[string]int {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	out := map[string]int{}
	me := os.Getpid()
	for _, pr := range processes() {
		if i := slices.Index(pr.args, "demo-server"); pr.ppid == me && i >= 0 && i+1 < len(pr.args) {
			out[pr.args[i+1]] = pr.pid
		}
	}
	return out
}

func demoChild(t *testing.T, name string) int {
	t.Helper()
	var pid int
	waitFor(t, "the "+name+" demo server process", 100, func() bool {
		pid = demoChildren(t)[name]
		return pid != 0
	})
	return pid
}

func TestUpPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, flag := range []string{"--http-listen", "--nats-listen"} {
		args := []string{"up", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", flag, ln.Addr().String()}
		_, _, err := runCmd(t, ctx, args...)
		if err == nil || !strings.Contains(err.Error(), flag+" "+ln.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("%s on a used port: %v", flag, err)
		}
	}
}

func TestUpBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  - {name: github, transport: http}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "up", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--config", path)
	if err == nil || err.Error() != path+":2: servers[0] (github): field url: required for transport http" {
		t.Errorf("up with a bad config: %v", err)
	}
}

// --nats-creds given to up without --nats is refused: the embedded server takes no credentials,
// and ignoring the flag hid that the user meant another server. A usage error (exit status 2),
// as --nats-listen with --nats.
func TestUpCredsWithoutNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	_, errOut, err := runCmd(t, ctx, "up", "--data", data, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--nats-creds", filepath.Join(data, "user.creds"))
	if ec, ok := err.(exitCode); !ok || ec != 2 || !strings.Contains(errOut, "--nats-creds needs --nats") || !strings.Contains(errOut, "Usage: mcpstream up") {
		t.Errorf("up --nats-creds without --nats: %v, want exit status 2 and a usage error\n%s", err, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("up created its data directory before refusing its flags: %v", err)
	}
}

// --nats-listen is the embedded server's listener: with --nats up runs no server, and the flag was
// ignored without a word (up started against --nats; whoever was told to connect to the
// --nats-listen address found nothing there). A usage error (exit status 2) naming both flags,
// before anything starts or is created.
func TestUpNATSListenWithNATS(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	out, errOut, err := runCmd(t, ctx, "up", "--nats", env.URL, "--nats-listen", "127.0.0.1:0", "--data", data, "--http-listen", "")
	if ec, ok := err.(exitCode); !ok || ec != 2 {
		t.Fatalf("up --nats URL --nats-listen ADDR: %v, want exit status 2\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "--nats-listen") || !strings.Contains(errOut, "--nats URL") || !strings.Contains(errOut, "Usage: mcpstream up") {
		t.Errorf("the usage error names not both flags:\n%s", errOut)
	}
	if out != "" || strings.Contains(errOut, "role started") {
		t.Errorf("up started before refusing its flags:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("up created its data directory before refusing its flags: %v", err)
	}
	// --nats-listen none with --nats says the same: still a flag for a server up does not run.
	if _, _, err := runCmd(t, ctx, "up", "--nats", env.URL, "--nats-listen", "none", "--data", data, "--http-listen", ""); err != exitCode(2) {
		t.Errorf("up --nats URL --nats-listen none: %v, want exit status 2", err)
	}
}

func TestRoleSubcommandHelp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, args := range [][]string{{"registrysync", "--help"}, {"up", "--help"}, {"help", "demo-server"}} {
		out, _, err := runCmd(t, ctx, args...)
		if err != nil || !strings.Contains(out, "Usage: mcpstream ") || !strings.Contains(out, "Examples:") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

func TestUpDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err = runCmd(t, ctx, "up", "--data", dir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	// It names the process that holds it (this one, here).
	if err == nil || !strings.Contains(err.Error(), "is in use by another mcpstream process") ||
		!strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Errorf("up on a locked data directory: %v; want it to name process %d", err, os.Getpid())
	}
}

// TestRegistrySyncRoleExternalNATS runs the registrysync role subcommand against a separate NATS
// server, as a scaled-out deployment does: health, then the demo servers ready over NATS.
func TestRegistrySyncRoleExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three demo server processes (run without -short)")
	}
	env := natstest.Start(t)
	p := runRegistrySyncRole(t, env)
	if p.nats != env.URL {
		t.Errorf("start line names NATS %s, want %s", p.nats, env.URL)
	}
	_, body := p.healthz(t)
	if roles, _ := body["roles"].(map[string]any); len(roles) != 1 || roles["registrysync"] != "ready" {
		t.Errorf("/healthz roles = %v, want only registrysync ready", body["roles"])
	}
	p.waitDemoReady(t)
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.data, "nats")); !os.IsNotExist(err) {
		t.Errorf("a role against external NATS created an embedded store (%v)", err)
	}
}

// startExecutorRole runs the executor role against env with the configuration file y, in a
// data directory of its own; cleanup stops it and checks it stopped cleanly.
func startExecutorRole(t *testing.T, env *natstest.Env, y string) *upProcess {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &upProcess{data: dir, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		p.done <- run(ctx, []string{"executor", "--nats", env.URL, "--config", cfgPath, "--data", dir, "--http-listen", ""}, p.out, p.errOut)
	}()
	t.Cleanup(func() {
		if err := p.stop(t); err != nil {
			t.Errorf("executor did not stop cleanly: %v", err)
		}
	})
	return p
}

// The streams section of the configuration sets the retention of the results and audit streams
// when a process declares them (here the executor role against an existing NATS).
func TestStreamsRetentionFromConfig(t *testing.T) {
	env := natstest.Start(t)
	startExecutorRole(t, env, "servers: []\nstreams: {resultsMaxAge: 2h, resultsMaxBytes: 1GiB, auditMaxAge: 720h}\n")
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	maxAge := func(name string) (time.Duration, int64) {
		s, err := env.JS.Stream(sctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxAge, s.CachedInfo().Config.MaxBytes
	}
	// (The streams are declared one after the other: wait for the last one's, audit.)
	waitFor(t, "the streams' retention", 600, func() bool {
		age, _ := maxAge(subjects.ResultsStream)
		aage, _ := maxAge(subjects.AuditStream)
		return age == 2*time.Hour && aage != 7*24*time.Hour // (natstest declared it with the default)
	})
	if _, n := maxAge(subjects.ResultsStream); n != 1<<30 {
		t.Errorf("results max bytes %d, want 1 GiB", n)
	}
	if age, n := maxAge(subjects.AuditStream); age != 720*time.Hour || n != -1 {
		t.Errorf("audit: max age %v, max bytes %d; want 720h, unlimited", age, n)
	}
}

// TestUpEmbeddedNATSDurability: the embeddedNats section reaches the embedded server, and up
// says at start when it fsyncs its store.
func TestUpEmbeddedNATSDurability(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers: []\nembeddedNats: {sync: always, maxStore: 2GiB}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUp(t, "--config", cfgPath)
	waitFor(t, "the embedded server's durability in the log", 600, func() bool {
		return strings.Contains(p.errOut.String(), "fsync after every write")
	})
	if out := p.errOut.String(); strings.Contains(out, "embeddedNats section is not used") {
		t.Errorf("up said its own embedded server does not use the section:\n%s", out)
	}
}

// TestDemoServerHelpControlFile checks that `demo-server --help` tells a new user what the
// control file holds, what a broken one does, and where its reports go under `up`.
func TestDemoServerHelpControlFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "demo-server", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"hide": ["listIssues"], "add": ["assignIssue"]}`, "--control FILE",
		"one\nnotifications/tools/list_changed", "missing file", "malformed", "the current tools stay",
		"--log-level debug"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo-server --help lacks %q:\n%s", want, out)
		}
	}
}

// The embedded server has no authentication: up warns when it listens beyond this host.
func TestExposedListen(t *testing.T) {
	for listen, want := range map[string]bool{
		"none": false, "127.0.0.1:4222": false, "127.1.2.3:4222": false, "[::1]:4222": false, "localhost:4222": false,
		"0.0.0.0:4222": true, "[::]:4222": true, ":4222": true, "10.0.0.5:4222": true, "nats.example.com:4222": true, "garbage": true,
	} {
		if got := exposed(listen); got != want {
			t.Errorf("exposed(%q) = %v, want %v", listen, got, want)
		}
	}
}

// demo-server --logs has a bound, named in its help: beyond it (or below 0) a usage error
// (exit 2), not an allocation of every entry that runs out of memory.
func TestDemoServerLogsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "demo-server", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "at most 1000000") {
		t.Errorf("demo-server --help does not name the bound of --logs:\n%s", out)
	}
	old := demoStdin
	demoStdin = strings.NewReader("") // a stdio server that starts ends at once
	t.Cleanup(func() { demoStdin = old })
	for _, n := range []string{"1000001", "-1", "9223372036854775807"} {
		_, errOut, err := runCmd(t, ctx, "demo-server", "logging", "--logs", n)
		if err != exitCode(2) || !strings.Contains(errOut, "--logs "+n) {
			t.Errorf("--logs %s: %v, stderr:\n%s", n, err, errOut)
		}
	}
}
