package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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

// swappable serves the handler it holds: swapping it is a server restart that forgets every
// session.
type swappable struct{ h atomic.Pointer[http.Handler] }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

func (s *swappable) set(h http.Handler) { s.h.Store(&h) }

// A legacy streamable HTTP server that restarted answers the old session's tools/call 404
// (the spec: it MUST, for a session it does not know): the call did not run. It used to be
// answered outcome_unknown, and so was every call after it (mcp-go sends nothing once the
// session ended) until a periodic probe noticed: a session that ended is lost at once, and
// the calls are unavailable, nothing sent, until the connector has reconnected.
func TestSessionTerminatedCallNotRun(t *testing.T) {
	var ran atomic.Int32
	restarted := newFixture(fixtureOptions{})
	restarted.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return mcp.NewToolResultText("ran"), nil
		})
	sw := &swappable{}
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "restarts", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("restarts"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	// The restarted server answers the connector's listening GET 405 (no stream offered), not
	// 404: what is tested is the calls' own 404. (A 404 there ends the session as well; a call
	// then in flight reads its own answer: TestSessionTerminatedInFlightCallReadsItsRefusal.)
	next := server.NewStreamableHTTPServer(restarted, server.WithStateful(true))
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	}))

	args := json.RawMessage(`{"text":"hi"}`)
	for i := range 2 {
		r := dispatch(t, h, "restarts", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args})
		if r.Error == nil {
			// (the connector reconnected in between: the call ran on the new session)
			if i == 0 {
				t.Fatalf("call %d: got result %s before the session could be found ended", i, r.Result)
			}
			continue
		}
		if r.Error.Code != subjects.CodeUnavailable {
			t.Errorf("call %d: got %+v; want unavailable (the server did not run it)", i, r.Error)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the tool ran %d times on the old session", n)
	}
	// The connector reconnects by itself, and the call runs on the new session.
	waitUntil(t, "a call on the new session", func() bool {
		r := dispatch(t, h, "restarts", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args})
		return r.Error == nil
	})
}

// refusing answers every tools/call POST 401 while refuse is set: the host's credential was
// revoked. Only calls: a re-list the connector makes meanwhile (the one its listening GET
// stream schedules as it opens, which may come after ready) would meet the 401 first, end the
// session, and the call would not be sent at all (1 run in about 50 under -race).
type refusing struct {
	next   http.Handler
	refuse atomic.Bool
}

func (r *refusing) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.refuse.Load() && req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == string(mcp.MethodToolsCall) {
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		}
	}
	r.next.ServeHTTP(w, req)
}

// A tools/call the server answers 401 did not run: unavailable, not outcome_unknown, and the
// connector reconnects (here once the credential is good again).
func TestUnauthorizedCallNotRun(t *testing.T) {
	var ran atomic.Int32
	srv := newFixture(fixtureOptions{})
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return mcp.NewToolResultText("ran"), nil
		})
	rf := &refusing{next: server.NewStreamableHTTPServer(srv, server.WithStateful(true))}
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "auth", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("auth"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rf.refuse.Store(true)
	args := json.RawMessage(`{"text":"hi"}`)
	r := dispatch(t, h, "auth", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args})
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable {
		t.Errorf("got result %s, error %+v; want unavailable (the server did not run it)", r.Result, r.Error)
	} else if r.NotSent || strings.Contains(r.Error.Message, "nothing was sent") || !strings.Contains(r.Error.Message, "without running it") {
		// It reached the server: the executor takes "nothing was sent" as a call that never
		// did, and gives its rate counts back.
		t.Errorf("message %q: want it said refused without running, not nothing sent", r.Error.Message)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
	rf.refuse.Store(false)
	waitUntil(t, "a call once the server takes the credential again", func() bool {
		r := dispatch(t, h, "auth", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args})
		return r.Error == nil
	})
}

// After a server's 404 ends the session, mcp-go refuses the session's next requests itself,
// without sending them (a call that had passed dispatch's isLost check when another's 404
// came): such a call never reached the server, and says "nothing was sent" (the executor then
// gives back its rate counts); only the call the server answered 404 was refused by it.
func TestSessionEndedLocalRefusalNotSent(t *testing.T) {
	var posts atomic.Int32
	sw := &swappable{}
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true)))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		sw.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "restarts", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("restarts"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.m.mu.Lock()
	c := h.m.conns["restarts"]
	h.m.mu.Unlock()
	s := c.session()
	sw.set(server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true))) // forgets the session
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := json.RawMessage(`{"text":"hi"}`)
	// Both calls are let in, as dispatch does, before the first one's 404 ends the session.
	for range 2 {
		if !s.beginCall() {
			t.Fatal("the session refused a call before the server restarted")
		}
	}
	first := s.callTool(ctx, "echo", args) // answered 404 by the server
	s.calls.Done()
	before := posts.Load()
	second := s.callTool(ctx, "echo", args) // refused by mcp-go: the session ended
	s.calls.Done()
	if n := posts.Load() - before; n != 0 {
		t.Fatalf("the second call sent %d POSTs; want none (mcp-go refuses an ended session's requests)", n)
	}
	if first.sent || first.refused == nil || !strings.Contains(first.refused.Message, "without running it") {
		t.Errorf("the call the server answered 404: sent %v, refused %+v; want refused by the server, unrun", first.sent, first.refused)
	}
	if second.sent || second.refused != nil {
		t.Errorf("the call mcp-go refused itself: sent %v, refused %+v; want not sent, no refusal by the server (nothing was sent)", second.sent, second.refused)
	}
}
