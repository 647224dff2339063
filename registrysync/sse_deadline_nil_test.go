package registrysync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// deadlineOnly is a context whose deadline has passed but whose timer has not fired yet: Err is
// still nil. A context.WithTimeout is in that state for a moment after its deadline, until its
// timer runs (a loaded machine stretches the moment).
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// mcp-go's SSE transport answers a request whose deadline passed while its POST travelled with
// (nil, ctx.Err()), which is (nil, nil) before the context's timer fires, and mcp-go's client then
// dereferences the nil response: the call panicked (the process, for a call made in process).
// The request is a timeout like any other.
func TestSSEDeadlinePassedDuringPost(t *testing.T) {
	srv := server.NewMCPServer("slowpost", "1.0.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("t"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ran"), nil
	})
	sse := server.NewSSEServer(srv)
	var hold atomic.Pointer[time.Time]
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "message") {
			if d := hold.Load(); d != nil {
				for !time.Now().After(*d) { // the POST is answered once the call's deadline passed
					time.Sleep(time.Millisecond)
				}
			}
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "slowpost", Transport: TransportSSE, URL: ts.URL + "/sse"}))
	rec := record(t, h.env, subjects.RegistryServer("slowpost"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.m.mu.Lock()
	c := h.m.conns["slowpost"]
	h.m.mu.Unlock()
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		t.Fatal("no session")
	}
	d := time.Now().Add(100 * time.Millisecond)
	hold.Store(&d)
	var r callResult
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a call whose deadline passed during its POST panicked: %v", p)
			}
		}()
		r = s.callTool(deadlineOnly{context.Background(), d}, "t", nil)
	}()
	if r.err == nil || r.raw != nil {
		t.Fatalf("got %+v, want the call ended without an answer", r)
	}
}
