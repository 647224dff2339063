package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Tests of what an operator does to role processes: stopping them with work in flight.

func TestInFlightGrace(t *testing.T) {
	tests := []struct{ stop, want time.Duration }{
		{0, 0},
		{3 * time.Second, 2 * time.Second},
		{15 * time.Second, 10 * time.Second}, // the default: the executor's and connectors' former fixed grace
		{60 * time.Second, 55 * time.Second},
		{10 * time.Minute, 10*time.Minute - 5*time.Second},
	}
	for _, tc := range tests {
		if got := inFlightGrace(tc.stop); got != tc.want {
			t.Errorf("inFlightGrace(%s) = %s, want %s", tc.stop, got, tc.want)
		}
	}
}

// An executor role stopped while a call runs gives the call the time --stop-timeout allows, not
// a fixed time of its own: with --stop-timeout 3s and a call that does not finish, it stops
// within the timeout (exit status 0), the call left to another executor. (It used to wait 10 s
// whatever --stop-timeout said: past a shorter timeout the process exited with status 1, and a
// longer one never let a call run past 10 s.)
func TestExecutorRoleStopGraceFollowsStopTimeout(t *testing.T) {
	env := natstest.Start(t)
	publishDemoTools(t, env, "slow", "wait_for_it")

	// The connector of server "slow": it takes the call and never answers.
	dispatched := make(chan struct{}, 1)
	sub, err := env.NC.Subscribe(subjects.Dispatch("slow"), func(*nats.Msg) {
		select {
		case dispatched <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := env.NC.Flush(); err != nil { // subscribed before a call is dispatched
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"executor", "--nats", env.URL, "--data", t.TempDir(), "--stop-timeout", "3s", "--workers", "2"}, &syncBuffer{}, &errOut)
	}()

	cl := executor.Client{NC: env.NC, JS: env.JS}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if _, _, err := cl.Submit(sctx, "local", subjects.CallRequest{ID: "stop-1", Tool: "slow__wait_for_it", Arguments: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dispatched:
	case err := <-done:
		t.Fatalf("executor exited before the call was dispatched: %v\n%s", err, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the call was not dispatched within 30s\n%s", errOut.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("executor stopped with %v, want a clean stop within --stop-timeout\n%s", err, errOut.String())
		}
		if !strings.Contains(errOut.String(), "stopping with calls still running") {
			t.Errorf("no warning about the call left running:\n%s", errOut.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("executor still running 40s after the interrupt\n%s", errOut.String())
	}
}

// roleProcess is one role subcommand run in-process (as `mcpstream ROLE ...` runs it), with
// its HTTP listener on a free port.
type roleProcess struct {
	http   string
	out    *syncBuffer
	errOut *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

func startRole(t *testing.T, args ...string) *roleProcess {
	t.Helper()
	p := &roleProcess{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	out := p.out
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- run(ctx, append(args, "--http-listen", "127.0.0.1:0"), out, p.errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(40 * time.Second):
			t.Errorf("%s still running 40s after the interrupt", args[0])
		}
	})
	_, p.http = waitStartLine(t, args[0], 600, out, p.errOut, p.done)
	return p
}

// healthz returns the status code and the "status" and "nats" fields of GET /healthz.
func (p *roleProcess) healthz() (int, string, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.http + "/healthz")
	if err != nil {
		return 0, "", ""
	}
	defer resp.Body.Close()
	var body struct{ Status, NATS string }
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Status, body.NATS
}

// exited returns the role's error once it has returned (false while it runs).
func (p *roleProcess) exited() (error, bool) {
	select {
	case err := <-p.done:
		p.done <- err
		return err, true
	default:
		return nil, false
	}
}

// checkStreamsOften makes role processes started by the test check their streams every 50 ms.
func checkStreamsOften(t *testing.T) {
	old := streamCheckEvery
	streamCheckEvery = 50 * time.Millisecond
	t.Cleanup(func() { streamCheckEvery = old }) // registered first: runs after the roles stopped
}

// restartableNATS is an embedded NATS server that the test stops and starts again on the same
// port, with its store kept or lost.
type restartableNATS struct {
	srv   *natsembed.Server
	url   string
	store string
}

func startRestartableNATS(t *testing.T) *restartableNATS {
	t.Helper()
	n := &restartableNATS{store: t.TempDir()}
	srv, err := natsembed.Start(natsembed.Config{StoreDir: n.store})
	if err != nil {
		t.Fatal(err)
	}
	n.srv, n.url = srv, srv.ClientURL()
	t.Cleanup(func() { n.srv.Shutdown() })
	return n
}

// restart starts the server again on its port, with its store, or an empty one (freshStore).
func (n *restartableNATS) restart(t *testing.T, freshStore bool) {
	t.Helper()
	if freshStore {
		n.store = t.TempDir()
	}
	var err error
	for range 50 { // the port may take a moment to be free again
		n.srv, err = natsembed.Start(natsembed.Config{StoreDir: n.store, Listen: strings.TrimPrefix(n.url, "nats://")})
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("restart nats: %v", err)
}

// While NATS is away a role process answers /healthz 503 (nats_disconnected), and 200 again
// once it reconnected; a NATS restart that keeps its store leaves it running. (It answered 200
// "ok" throughout, and mcpstream_executor_ready / mcpstream_catalog_ready stayed 1.)
func TestRoleHealthFollowsNATS(t *testing.T) {
	checkStreamsOften(t)
	n := startRestartableNATS(t)
	p := startRole(t, "indexer", "--nats", n.url, "--data", t.TempDir())
	waitFor(t, "/healthz 200", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })
	if _, _, st := p.healthz(); st != "connected" {
		t.Errorf("/healthz nats = %q, want connected", st)
	}
	// The start line names servers only where the process runs them (registrysync).
	if line := p.out.String(); strings.Contains(line, "servers ") || !strings.Contains(line, "config demo servers") {
		t.Errorf("indexer start line %q: want the config, not servers it does not run", line)
	}

	n.srv.Shutdown()
	waitFor(t, "/healthz 503 nats_disconnected", 600, func() bool {
		code, status, _ := p.healthz()
		return code == http.StatusServiceUnavailable && status == "nats_disconnected"
	})
	if m := scrape(t, p.http); !strings.Contains(m, "mcpstream_nats_connected 0") {
		t.Errorf("/metrics while NATS is away has no mcpstream_nats_connected 0")
	}

	n.restart(t, false)
	waitFor(t, "/healthz 200 after the reconnect", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })
	for range 10 { // a few stream checks (every 50 ms): the streams are the same ones
		time.Sleep(50 * time.Millisecond)
	}
	if err, ok := p.exited(); ok {
		t.Fatalf("indexer exited after NATS came back with its store: %v\n%s", err, p.errOut.String())
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// NATS restarted without its store (or the streams deleted by hand) under running roles: they
// must not go on serving the old state. They kept running, healthy and silent: an indexer
// replica served the catalog of the lost stream and followed the new stream from its old
// position (so it skipped the new stream's first events: replicas diverged), the executors'
// consumer was gone (calls waited forever), registrysync did not publish its lists again. Now
// each process stops with an error naming the stream, so that a restart (Restart=on-failure)
// declares the streams again and rebuilds.
func TestRolesStopWhenStreamsAreLost(t *testing.T) {
	checkStreamsOften(t)
	for _, role := range []string{"indexer", "executor"} {
		t.Run(role, func(t *testing.T) {
			n := startRestartableNATS(t)
			p := startRole(t, role, "--nats", n.url, "--data", t.TempDir())
			waitFor(t, "/healthz 200", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })

			n.srv.Shutdown()
			n.restart(t, true)
			var err error
			waitFor(t, role+" to stop", 600, func() bool {
				var ok bool
				err, ok = p.exited()
				return ok
			})
			if !errors.Is(err, errStreamLost) {
				t.Errorf("%s exited with %v, want an error wrapping errStreamLost\n%s", role, err, p.errOut.String())
			}
		})
	}

	// A stream recreated by hand while NATS stays up is noticed too.
	env := natstest.Start(t)
	p := startRole(t, "indexer", "--nats", env.URL, "--data", t.TempDir())
	waitFor(t, "/healthz 200", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	waitFor(t, "indexer to stop", 600, func() bool {
		var ok bool
		err, ok = p.exited()
		return ok
	})
	if !errors.Is(err, errStreamLost) || !strings.Contains(err.Error(), subjects.RegistryStream) {
		t.Errorf("indexer exited with %v, want errStreamLost naming %s", err, subjects.RegistryStream)
	}
}
