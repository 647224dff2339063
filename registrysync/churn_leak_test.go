package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// Churn tests: a connector that reconnects, re-lists, or servers that come and go, many times
// over, must end with as many goroutines and open files as after the first time. Each cycle
// that leaked one goroutine or one descriptor would leave churnCycles of them.
const (
	churnCycles = 12
	churnSlack  = 6 // goroutines (or fds) that may come and go on their own (NATS, HTTP keep-alives)
)

// resources is what a leak would grow: goroutines and open file descriptors.
type resources struct{ goroutines, fds int }

func (r resources) String() string { return fmt.Sprintf("%d goroutines, %d fds", r.goroutines, r.fds) }

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("no /proc/self/fd (the churn tests count open files there; CI runs on Linux): %v", err)
	}
	return len(ents)
}

func measure(t *testing.T) resources {
	return resources{goroutines: runtime.NumGoroutine(), fds: openFDs(t)}
}

// churnSettled waits (bounded) until the goroutines and fds are back within churnSlack of base
// after churnCycles cycles of what (churnSettledN).
func churnSettled(t *testing.T, what string, base resources) {
	t.Helper()
	churnSettledN(t, fmt.Sprintf("%d %s", churnCycles, what), base)
}

// churnSettledN waits (bounded) until the goroutines and fds are back within churnSlack of base,
// failing the test with what is left over (and every goroutine's stack) if they never are; what
// says what was done since base.
func churnSettledN(t *testing.T, what string, base resources) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var now resources
	for {
		now = measure(t)
		if now.goroutines <= base.goroutines+churnSlack && now.fds <= base.fds+churnSlack {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Errorf("after %s: %s, before: %s (a leak of about one per cycle)\n%s", what, now, base, buf)
}

// A stdio server that crashes over and over: every session, child process, pipe and goroutine
// of the lost ones is gone.
func TestChurnStdioCrashLoopLeaksNothing(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "child", "fixture")))
	rec := record(t, h.env, subjects.RegistryServer("child"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	crash := func() {
		t.Helper()
		r := dispatch(t, h, "child", subjects.DispatchRequest{V: 1, Tool: "exit"})
		if r.Error == nil {
			t.Fatalf("exit answered %s", r.Result)
		}
		lost := rec.wait(ready.seq, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
		ready = rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
	}
	crash() // the first of everything (pools, buffers) is made
	waitUntil(t, "a call answered", func() bool {
		return h.m.Dispatch(context.Background(), "child", subjects.DispatchRequest{V: 1, Tool: "pid"}).Error == nil
	})
	base := measure(t)
	for range churnCycles {
		crash()
	}
	waitUntil(t, "a call answered", func() bool {
		return h.m.Dispatch(context.Background(), "child", subjects.DispatchRequest{V: 1, Tool: "pid"}).Error == nil
	})
	churnSettled(t, "crashes of a stdio server", base)
}

// A streamable HTTP server that goes away and comes back on the same address, over and over.
func TestChurnHTTPServerRestartsLeakNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	start := func(ln net.Listener) *http.Server {
		hs := &http.Server{Handler: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))}
		go func() { _ = hs.Serve(ln) }()
		return hs
	}
	hs := start(ln)
	t.Cleanup(func() { _ = hs.Close() })
	cfg := fastConfig(ServerConfig{Name: "web", Transport: TransportHTTP, URL: "http://" + addr + "/mcp"})
	cfg.PingEvery = 50 * time.Millisecond // a server gone is noticed by the probe
	cfg.PingTimeout = 5 * time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("web"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	restart := func() {
		t.Helper()
		_ = hs.Close()
		lost := rec.wait(ready.seq, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
		var ln net.Listener
		waitUntil(t, "address free again", func() bool {
			var err error
			ln, err = net.Listen("tcp", addr)
			return err == nil
		})
		hs = start(ln)
		ready = rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
	}
	restart()
	base := measure(t)
	for range churnCycles {
		restart()
	}
	churnSettled(t, "restarts of an HTTP server", base)
}

// A server that announces list_changed over and over: every re-list ends.
func TestChurnListChangedLeaksNothing(t *testing.T) {
	for _, proto := range []string{"", "2025-11-25"} {
		t.Run("protocol="+proto, func(t *testing.T) {
			srv := newFixture(fixtureOptions{})
			url := httpFixture(t, srv)
			h := run(t, nil, fastConfig(ServerConfig{Name: "web", Transport: TransportHTTP, URL: url, ProtocolVersion: proto}))
			rec := record(t, h.env, subjects.RegistryServer("web"))
			last := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
			change := func(i int) {
				t.Helper()
				name := fmt.Sprintf("added_%d", i)
				srv.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("ok"), nil
				})
				last = rec.wait(last.seq, "snapshot with "+name, isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
					return hasName(t, s, name)
				}))
			}
			change(-1)
			base := measure(t)
			for i := range churnCycles {
				change(i)
			}
			churnSettled(t, "list_changed", base)
		})
	}
}

// Servers added and removed over and over (each with its stdio child): their connectors,
// endpoints and processes are all gone.
func TestChurnAddRemoveLeaksNothing(t *testing.T) {
	h := run(t, nil, fastConfig())
	waitUntil(t, "running", h.m.Ready)
	rec := record(t, h.env, subjects.RegistryAll) // one recorder: each holds a consumer
	cycle := func(i int) {
		t.Helper()
		name := fmt.Sprintf("churn%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := h.m.Add(ctx, stdioServer(t, name, "fixture")); err != nil {
			t.Fatal(err)
		}
		rec.wait(0, name+" ready", func(e event) bool {
			return e.subject.Server == name && isStatus(subjects.StatusReady, "")(e)
		})
		r := dispatch(t, h, name, subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		if r.Error != nil {
			t.Fatalf("echo: %+v", r.Error)
		}
		if err := h.m.Remove(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	cycle(-1)
	base := measure(t)
	for i := range churnCycles {
		cycle(i)
	}
	churnSettled(t, "servers added and removed", base)
}

// HTTP servers added and removed over and over, the MCP server staying up: each removed
// session's keep-alive connections are closed (its own transport is never used again), not
// left idle until the transport's idle timeout (90 s): a socket and three goroutines here, and a
// connection on the MCP server, per session closed. Streamable HTTP on both protocols (a
// legacy session ends with a DELETE, whose connection is the last one to go idle), and legacy
// HTTP+SSE.
func TestChurnHTTPAddRemoveLeavesNoConnection(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		transport   string
	}{
		{"http", "", TransportHTTP},
		{"http-2025-11-25", "2025-11-25", TransportHTTP},
		{"sse", "", TransportSSE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := httpFixture(t, newFixture(fixtureOptions{}))
			if tc.transport == TransportSSE {
				url = sseFixture(t, newFixture(fixtureOptions{}))
			}
			h := run(t, nil, fastConfig())
			waitUntil(t, "running", h.m.Ready)
			rec := record(t, h.env, subjects.RegistryAll)
			cycle := func(i int) {
				t.Helper()
				name := fmt.Sprintf("web%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				if err := h.m.Add(ctx, ServerConfig{Name: name, Transport: tc.transport, URL: url, ProtocolVersion: tc.proto}); err != nil {
					t.Fatal(err)
				}
				rec.wait(0, name+" ready", func(e event) bool {
					return e.subject.Server == name && isStatus(subjects.StatusReady, "")(e)
				})
				r := dispatch(t, h, name, subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
				if r.Error != nil {
					t.Fatalf("echo: %+v", r.Error)
				}
				if err := h.m.Remove(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			cycle(-1)
			base := measure(t)
			for i := range churnCycles {
				cycle(i)
			}
			churnSettled(t, "servers added and removed", base)
		})
	}
}
