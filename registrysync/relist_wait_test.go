package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// refusal is how a refuser answers: an HTTP status with a Retry-After, or (status 0) a
// JSON-RPC error.
type refusal struct {
	status     int
	retryAfter string
}

// refuser serves next, but refuses the POSTs of the methods in rules (and, with get set, every
// GET) as the rule says, and counts the POSTs of every method.
type refuser struct {
	next  http.Handler
	mu    sync.Mutex
	rules map[string]refusal
	get   *refusal
	seen  map[string]int
}

func newRefuser(next http.Handler) *refuser {
	return &refuser{next: next, rules: map[string]refusal{}, seen: map[string]int{}}
}

func (f *refuser) set(method string, r *refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		delete(f.rules, method)
	} else {
		f.rules[method] = *r
	}
}

func (f *refuser) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[method]
}

func (f *refuser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rule *refusal
	var id json.RawMessage
	f.mu.Lock()
	switch r.Method {
	case http.MethodGet:
		rule = f.get
	case http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &req) == nil {
			f.seen[req.Method]++
			if ru, ok := f.rules[req.Method]; ok {
				rule, id = &ru, req.ID
			}
		}
	}
	f.mu.Unlock()
	switch {
	case rule == nil:
		f.next.ServeHTTP(w, r)
	case rule.status == 0:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32603,"message":"refused on purpose"}}`))
	default:
		w.Header().Set("Retry-After", rule.retryAfter)
		http.Error(w, "busy", rule.status)
	}
}

// The list backoff was one for the whole session: every re-list made while some kind's failure
// stood drew its next wait, whatever kind it listed and whether it failed. A tools list that
// failed once was retried later after each prompts re-list that succeeded meanwhile (the wait
// doubled every time), and the first failure of prompts waited as long as the tools' many. Each
// kind's retry now follows its own failures: a re-list of other kinds leaves a kind's retry
// where it was, and a kind's first failure waits the initial backoff.
func TestRelistBackoffPerKind(t *testing.T) {
	t.Parallel()
	rf := newRefuser(server.NewStreamableHTTPServer(newFixture(fixtureOptions{})))
	rf.set(string(mcp.MethodToolsList), &refusal{}) // a JSON-RPC error: list_failed, no Retry-After
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "perkind", URL: ts.URL + "/mcp"})
	// Long enough that no retry timer fires during the test: every wait comes from a re-list
	// the test asks for. Jitter is 20%.
	cfg.BackoffInitial, cfg.BackoffMax = time.Minute, maxRetryAfterWait
	const most = 72 * time.Second // the initial backoff's longest
	h, waits := chosenWaits(t, cfg, "perkind", "relist")
	rec := record(t, h.env, subjects.RegistryServer("perkind"))
	rec.wait(0, "list_failed", isStatus(subjects.StatusUnavailable, subjects.CodeListFailed))
	first := firstWait(t, waits, "relist")
	if first > most {
		t.Fatalf("the first tools failure waits %s; want the initial backoff (at most %s)", first, most)
	}
	for i := range 2 {
		if rep := relist(t, h, "perkind", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts}); rep.Error != nil {
			t.Fatalf("relist prompts: %+v", rep.Error)
		}
		if d := firstWait(t, waits, "relist"); d > first {
			t.Errorf("after prompts re-list %d (it succeeded) the tools retry waits %s; it waited %s before: another kind's re-list advanced its backoff", i+1, d, first)
		}
	}
	// Tools fail on: their own backoff grows.
	for range 3 {
		if rep := relist(t, h, "perkind", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}); rep.Error == nil {
			t.Fatal("relist tools succeeded; the server refuses it")
		}
		firstWait(t, waits, "relist")
	}
	// Prompts fail for the first time: they are retried after the initial backoff, not after
	// the tools' (the timer is armed for the sooner of the two).
	rf.set(string(mcp.MethodPromptsList), &refusal{})
	if rep := relist(t, h, "perkind", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts}); rep.Error == nil {
		t.Fatal("relist prompts succeeded; the server refuses it")
	}
	if d := firstWait(t, waits, "relist"); d > most {
		t.Errorf("the first prompts failure is retried after %s; want the initial backoff (at most %s): the tools' failures lengthened it", d, most)
	}
}

// A re-list the executor asks for while the server's Retry-After for that kind runs was sent
// to the server at once (and answered with its 503 again, without the wait): it is answered
// unavailable with retryAfterMs, nothing sent.
func TestRelistRequestInsideRetryAfter(t *testing.T) {
	t.Parallel()
	rf := newRefuser(server.NewStreamableHTTPServer(newFixture(fixtureOptions{})))
	rf.set(string(mcp.MethodToolsList), &refusal{status: http.StatusServiceUnavailable, retryAfter: "9"})
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "waitlist", URL: ts.URL + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("waitlist"))
	rec.wait(0, "list_failed", isStatus(subjects.StatusUnavailable, subjects.CodeListFailed))
	sent := rf.count(string(mcp.MethodToolsList))
	for _, kind := range []subjects.Kind{subjects.KindTools, ""} {
		rep := relist(t, h, "waitlist", subjects.RelistRequest{V: 1, Kind: kind})
		switch {
		case rep.Error == nil:
			t.Errorf("relist %q succeeded; the server refuses tools/list", kind)
		case rep.Error.Code != subjects.CodeUnavailable || rep.Error.RetryAfterMs <= 0 || rep.Error.RetryAfterMs > 9000:
			t.Errorf("relist %q: %+v; want unavailable with retryAfterMs up to 9000", kind, rep.Error)
		}
	}
	if n := rf.count(string(mcp.MethodToolsList)); n != sent {
		t.Errorf("tools/list sent %d more times within the server's Retry-After", n-sent)
	}
}

// A server/discover the server answers 503 with a Retry-After made mcp-go fall back to
// initialize at once (and the connector connect at 2025-11-25): the server was asked again
// within the wait it asked for. The connection fails, and is tried again after it.
func TestDiscoverRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	rf := newRefuser(server.NewStreamableHTTPServer(newFixture(fixtureOptions{})))
	rf.set(string(mcp.MethodServerDiscover), &refusal{status: http.StatusServiceUnavailable, retryAfter: "7"})
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "waitdiscover", URL: ts.URL + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("waitdiscover"))
	ev := rec.wait(0, "ready or unavailable", func(e event) bool {
		return isStatus(subjects.StatusReady, "*")(e) || isStatus(subjects.StatusUnavailable, "*")(e)
	})
	if st := ev.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeConnectFailed || st.RetryInMs != 7000 {
		t.Errorf("status %s %s retryInMs %d; want unavailable connect_failed retryInMs 7000", st.Status, st.Code, st.RetryInMs)
	}
	if n := rf.count(string(mcp.MethodInitialize)); n != 0 {
		t.Errorf("initialize sent %d times right after server/discover was refused with Retry-After 7", n)
	}
}

// The periodic server/discover probe of a 2026-07-28 session that the server answers 503 with a
// Retry-After loses the session; the reconnection waited the backoff only.
func TestProbeRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	rf := newRefuser(server.NewStreamableHTTPServer(newFixture(fixtureOptions{})))
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: "waitprobe", URL: ts.URL + "/mcp"})
	cfg.PingEvery = 100 * time.Millisecond
	h, waits := chosenWaits(t, cfg, "waitprobe", "reconnect")
	rec := record(t, h.env, subjects.RegistryServer("waitprobe"))
	if p := rec.wait(0, "ready", isStatus(subjects.StatusReady, "")).ev.Status.Protocol; !mcp.IsModernProtocol(p) {
		t.Fatalf("connected at %s; the probe is server/discover on 2026-07-28 only", p)
	}
	rf.set(string(mcp.MethodServerDiscover), &refusal{status: http.StatusTooManyRequests, retryAfter: "7"})
	if d := firstWait(t, waits, "reconnect"); d != 7*time.Second {
		t.Errorf("after a probe refused with Retry-After 7 the connector reconnects after %s", d)
	}
}

// A legacy SSE server whose opening GET is answered 503 with a Retry-After was connected to again
// after the backoff only.
func TestSSEOpenRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	rf := newRefuser(http.NotFoundHandler())
	rf.get = &refusal{status: http.StatusServiceUnavailable, retryAfter: "7"}
	ts := httptest.NewServer(rf)
	t.Cleanup(ts.Close)
	_, waits := chosenWaits(t, fastConfig(ServerConfig{Name: "waitsse", Transport: TransportSSE, URL: ts.URL + "/sse"}), "waitsse", "connect")
	if d := firstWait(t, waits, "connect"); d != 7*time.Second {
		t.Errorf("after the SSE GET was refused with Retry-After 7 the connector connects again after %s", d)
	}
}

// A tools list the server refuses 503 with a Retry-After while a list_changed comes during it
// was taken for a list the change overtook (skipped: not the server's failure), so nothing held
// the kind: the re-list the notification scheduled, and a relist request, asked the server
// again at once, within the wait it asked for. A refusal with a Retry-After is the server's
// word, whatever came meanwhile: the kind waits for it as after any such refusal.
func TestRetryAfterDuringListChanged(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	inner := server.NewStreamableHTTPServer(srv)
	var armed atomic.Bool
	var conn atomic.Pointer[connector]
	var lists atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodToolsList) {
				lists.Add(1)
				if armed.CompareAndSwap(true, false) {
					// The list changes while it is served: the connector hears of it before the
					// refusal comes.
					c := conn.Load()
					g0 := c.generation(subjects.KindTools)
					srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
					deadline := time.Now().Add(waitLimit)
					for c.generation(subjects.KindTools) == g0 && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					w.Header().Set("Retry-After", "30")
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "waitchanged", URL: ts.URL + "/mcp", Kinds: []string{"tools"}}))
	waitUntil(t, "ready", h.m.Ready)
	h.m.mu.Lock()
	conn.Store(h.m.conns["waitchanged"])
	h.m.mu.Unlock()

	armed.Store(true)
	rep := relist(t, h, "waitchanged", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
	if rep.Error == nil || rep.Error.RetryAfterMs <= 0 {
		t.Fatalf("relist tools, refused 503 Retry-After 30: %+v; want unavailable with retryAfterMs", rep.Error)
	}
	if armed.Load() {
		t.Fatal("the refusal was not served")
	}
	sent := lists.Load()
	rep = relist(t, h, "waitchanged", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
	if rep.Error == nil || rep.Error.Code != subjects.CodeUnavailable || rep.Error.RetryAfterMs <= 0 || rep.Error.RetryAfterMs > 30000 {
		t.Errorf("relist tools within the server's Retry-After: %+v; want unavailable with retryAfterMs up to 30000", rep.Error)
	}
	if n := lists.Load(); n != sent {
		t.Errorf("tools/list sent %d more times within the server's Retry-After (a list_changed came during the refused list)", n-sent)
	}
}
