package registrysync

import (
	"context"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// Calls a stdio server never answers, each ended by its timeout, over and over: the session's
// waits (its fast-path router, mcp-go's pending requests) and goroutines do not grow with them.
func TestHungCallsLeakNothing(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "stuck", "stuck")))
	rec := record(t, h.env, subjects.RegistryServer("stuck"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	timedOutBatches(t, h, "stuck")
	h.m.mu.Lock()
	c := h.m.conns["stuck"]
	h.m.mu.Unlock()
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil || s.child == nil {
		t.Fatal("no stdio session")
	}
	s.child.fast.mu.Lock()
	n := len(s.child.fast.waiting)
	s.child.fast.mu.Unlock()
	if n != 0 {
		t.Errorf("%d timed-out calls still waited for", n)
	}
}

// The same over streamable HTTP and legacy SSE, negotiated (2026-07-28 with mcp-go's server)
// and pinned to 2025-11-25: a tool that ends only when its request is cancelled. Over SSE a
// request has no stream of its own, whatever the protocol: only notifications/cancelled ends it
// (without it on 2026-07-28, every timed-out call stayed running in the server).
func TestHungHTTPCallsLeakNothing(t *testing.T) {
	for _, c := range []struct{ transport, protocol string }{
		{TransportHTTP, ""}, {TransportSSE, ""}, {TransportHTTP, "2025-11-25"}, {TransportSSE, "2025-11-25"},
	} {
		transport := c.transport
		t.Run(transport+"/"+c.protocol, func(t *testing.T) {
			srv := server.NewMCPServer("hang", "1.0.0", server.WithToolCapabilities(true))
			srv.AddTool(mcp.NewTool("t"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
			url := ""
			if transport == TransportSSE {
				ss := server.NewSSEServer(srv)
				ts := httptest.NewServer(ss)
				t.Cleanup(ts.Close)
				url = ts.URL + "/sse"
			} else {
				ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
				t.Cleanup(ts.Close)
				url = ts.URL + "/mcp"
			}
			h := run(t, nil, fastConfig(ServerConfig{Name: "hang", Transport: transport, URL: url, ProtocolVersion: c.protocol}))
			rec := record(t, h.env, subjects.RegistryServer("hang"))
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			timedOutBatches(t, h, "hang")
		})
	}
}

// timedOutBatches sends batches of 10 calls of server's tool t, each ended by its 50 ms timeout
// (answered timeout), churnCycles batches after a first one, and checks that goroutines and
// fds come back to what they were after the first (churnSettled).
func timedOutBatches(t *testing.T, h *harness, server string) {
	t.Helper()
	var sent atomic.Int64
	batch := func() {
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				r := h.m.Dispatch(context.Background(), server, subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 50})
				switch {
				case r.Error != nil && r.Error.Code == subjects.CodeTimeout:
					sent.Add(1)
				case r.Error != nil && r.Error.Code == subjects.CodeUnavailable && r.NotSent:
					// (A loaded machine: the 50 ms passed before the call was sent. Nothing to
					// leak; the other calls are the test's.)
				default:
					t.Errorf("a call of %s that never ends answered %+v", server, r.Error)
				}
			})
		}
		wg.Wait()
	}
	batch()
	base := measure(t)
	for range churnCycles {
		batch()
	}
	churnSettled(t, "batches of timed-out calls", base)
	if sent.Load() == 0 {
		t.Errorf("none of %d calls of %s was sent before its deadline: nothing hung", 10*(churnCycles+1), server)
	}
}
