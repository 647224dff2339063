package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// afterRun lets every request through to next; a POST carrying a tools/call reaches next (the
// tool runs), and then answer writes what the client gets instead of next's answer.
type afterRun struct {
	next   http.Handler
	answer func(w http.ResponseWriter)
	// gone, when set, answers a GET resuming an event stream (Last-Event-ID) 404: the server
	// restarted and forgot the session.
	gone bool
}

func (a *afterRun) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if a.gone && req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != "" {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			a.next.ServeHTTP(httptest.NewRecorder(), req) // the tool runs
			a.answer(w)
			return
		}
	}
	a.next.ServeHTTP(w, req)
}

// checkMayHaveRun dispatches echo once on a server behind a and wants an answer that does not
// say "nothing ran": the tool did run, and an executor retries such an answer for any tool.
func checkMayHaveRun(t *testing.T, a *afterRun, ran *atomic.Int32) {
	t.Helper()
	ts := httptest.NewServer(a)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "ran", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("ran"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "ran", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if n := ran.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
	if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
		t.Fatalf("got result %s, error %+v; want outcome_unknown (the tool ran)", r.Result, r.Error)
	}
}

// A 2025-11-25 server may end a request's event stream before the answer, once it sent an event
// id, and the client resumes it with a GET carrying Last-Event-ID (SEP-1699; servers do it to
// restart or rebalance). If the server restarted meanwhile, the GET is answered 404 and mcp-go
// fails the call with ErrSessionTerminated — but the POST was accepted (200) and the tool ran.
// It used to be answered unavailable, "nothing was sent", which the executor retries for any
// tool: a second run of a side-effecting call.
func TestResumed404CallMayHaveRun(t *testing.T) {
	var ran atomic.Int32
	checkMayHaveRun(t, &afterRun{
		next: server.NewStreamableHTTPServer(echoCounted(&ran), server.WithStateful(true)),
		gone: true,
		answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "id: prime-1\nretry: 10\n\n") // then the stream ends: resume
		},
	}, &ran)
}

// A 503 may come from a proxy after the server took the call: Envoy (and so Istio) answers 503
// "upstream connect error or disconnect/reset before headers" when the upstream connection
// ends after the request went out, say the server crashed after the tool's side effect. It used
// to be answered unavailable, "nothing ran", which the executor retries for any tool.
func TestProxy503AfterForwardMayHaveRun(t *testing.T) {
	var ran atomic.Int32
	checkMayHaveRun(t, &afterRun{
		next: server.NewStreamableHTTPServer(echoCounted(&ran), server.WithStateful(true)),
		answer: func(w http.ResponseWriter) {
			w.Header().Set("Server", "envoy")
			http.Error(w, "upstream connect error or disconnect/reset before headers. reset reason: connection termination",
				http.StatusServiceUnavailable)
		},
	}, &ran)
}

// The registrysync unit (deploy/) sets the caches npx and uvx write to, for the stdio servers it
// starts under ProtectSystem=strict: every variable it sets must reach a child (which inherits
// only a few variables of this process), or the unit's settings do nothing.
func TestDeployUnitEnvironmentReachesChildren(t *testing.T) {
	data, err := os.ReadFile("../deploy/mcpstream-registrysync.service")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(data), "\n") {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "Environment="); ok {
			name, value, _ := strings.Cut(kv, "=")
			t.Setenv(name, value)
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatal("the unit sets no environment variable: test out of date")
	}
	env := inheritedEnv(false)
	for _, name := range names {
		if !slices.Contains(env, name+"="+os.Getenv(name)) {
			t.Errorf("%s, set by the unit, does not reach a stdio child (inherited: %v)", name, env)
		}
	}
}
