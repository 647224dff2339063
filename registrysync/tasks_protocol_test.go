package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// taskServer is an mcp-go server with "research", a tool that requires tasks (it counts its
// runs in runs), and "plain".
func taskServer(runs *atomic.Int32) *server.MCPServer {
	srv := server.NewMCPServer("tasks", "1", server.WithToolCapabilities(true), server.WithTaskCapabilities(true, true, true))
	tool := mcp.NewTool("research", mcp.WithString("topic"))
	tool.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportRequired}
	srv.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		return mcp.NewToolResultText("report on " + req.GetString("topic", "")), nil
	})
	srv.AddTool(mcp.NewTool("plain"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("plain"), nil
	})
	return srv
}

// TestTaskToolOnModernSession: 2026-07-28 has no tasks/result (mcp-go answers -32601 and,
// over HTTP, takes tasks/get for a request of an unknown legacy session: 404). A task tool
// called there ran on the server every time while the caller got outcome_unknown (a read-only
// tool was then dispatched again by the executor, and ran again). It is refused unsent.
func TestTaskToolOnModernSession(t *testing.T) {
	var runs atomic.Int32
	url := httpFixture(t, taskServer(&runs))
	h := run(t, nil, fastConfig(ServerConfig{Name: "modern", URL: url}))
	waitUntil(t, "ready", func() bool { return h.m.Statuses()["modern"].Status == subjects.StatusReady })
	if p := h.m.Statuses()["modern"].Protocol; p != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %s, want 2026-07-28", p)
	}
	r := h.m.Dispatch(context.Background(), "modern", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 10000})
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || runs.Load() != 0 {
		t.Errorf("task tool on 2026-07-28: %+v %s; the tool ran %d times, want unavailable and never run", r.Error, r.Result, runs.Load())
	}
	if r := h.m.Dispatch(context.Background(), "modern", subjects.DispatchRequest{V: 1, Tool: "plain", TimeoutMs: 10000}); r.Error != nil {
		t.Errorf("plain tool: %+v", r.Error)
	}

	// Pinned to 2025-11-25, the same server runs it as a task.
	url2 := httpFixture(t, taskServer(&runs))
	h2 := run(t, h.env, fastConfig(ServerConfig{Name: "legacy", URL: url2, ProtocolVersion: "2025-11-25"}))
	waitUntil(t, "ready", func() bool { return h2.m.Statuses()["legacy"].Status == subjects.StatusReady })
	r = h2.m.Dispatch(context.Background(), "legacy", subjects.DispatchRequest{V: 1, Tool: "research", Arguments: json.RawMessage(`{"topic":"tides"}`), TimeoutMs: 10000})
	if r.Error != nil || resultText(t, r.Result) != "report on tides" || runs.Load() != 1 {
		t.Errorf("task tool on 2025-11-25: %+v %s (runs %d)", r.Error, r.Result, runs.Load())
	}
}

// taskShim serves taskServer over legacy streamable HTTP, but answers the task protocol of
// "research" itself: answer(method, params) returns the JSON-RPC result to send, or an HTTP
// status (>= 400) to fail the request with.
// rpcErrorAnswer, as the status a taskShim's answer returns, makes its result the error member
// of a JSON-RPC error response (HTTP 200).
const rpcErrorAnswer = -1

type taskShim struct {
	next   http.Handler
	mu     sync.Mutex
	seen   []string // methods answered, with the taskId of tasks/*
	answer func(method string, params json.RawMessage) (result string, status int)
}

func (s *taskShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		var p struct {
			Name   string `json:"name"`
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if len(m.ID) > 0 && (m.Method == "tools/call" && p.Name == "research" || strings.HasPrefix(m.Method, "tasks/")) {
			s.mu.Lock()
			s.seen = append(s.seen, strings.TrimSpace(m.Method+" "+p.TaskID))
			s.mu.Unlock()
			result, status := s.answer(m.Method, m.Params)
			if status == rpcErrorAnswer { // result is the JSON-RPC error member
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":`+result+`}`)
				return
			}
			if status >= 400 && result != "" { // a JSON body with the status
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, result)
				return
			}
			if status >= 400 {
				http.Error(w, "unavailable", status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.next.ServeHTTP(w, r)
}

func (s *taskShim) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// runShim starts a connector on a taskShim (2025-11-25) and waits until it is ready.
func runShim(t *testing.T, name string, sc ServerConfig, answer func(method string, params json.RawMessage) (string, int)) (*harness, *taskShim) {
	t.Helper()
	h, shim, _ := runShimWith(t, name, sc, answer, false)
	return h, shim
}

// runShimWith is runShim, with the manager's log lines (debug and up) when logged.
func runShimWith(t *testing.T, name string, sc ServerConfig, answer func(method string, params json.RawMessage) (string, int), logged bool) (*harness, *taskShim, *logBuffer) {
	t.Helper()
	var runs atomic.Int32
	shim := &taskShim{next: server.NewStreamableHTTPServer(taskServer(&runs)), answer: answer}
	ts := httptest.NewServer(shim)
	t.Cleanup(ts.Close)
	sc.Name, sc.URL, sc.ProtocolVersion = name, ts.URL+"/mcp", "2025-11-25"
	var h *harness
	var logs *logBuffer
	if logged {
		h, logs = runLogged(t, fastConfig(sc))
	} else {
		h = run(t, nil, fastConfig(sc))
	}
	waitUntil(t, "ready", func() bool { return h.m.Statuses()[name].Status == subjects.StatusReady })
	return h, shim, logs
}

const doneResult = `{"content":[{"type":"text","text":"done"}]}`

// TestTaskCreatedLoosely: a CreateTaskResult whose pollInterval is not an integer (250.5, a
// string, past int64) failed to decode and was taken for a result without a task: the caller
// got {"task":...} as the tool's result while the task ran on unobserved.
func TestTaskCreatedLoosely(t *testing.T) {
	t.Parallel()
	for _, poll := range []string{`250.5`, `"250"`, `1e30`, `-3`} {
		t.Run(poll, func(t *testing.T) {
			var gets atomic.Int32
			h, _ := runShim(t, "loose", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
				switch method {
				case "tools/call":
					return `{"task":{"taskId":"t-1","status":"working","pollInterval":` + poll + `,"createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`, 0
				case "tasks/get":
					if gets.Add(1) < 2 {
						return `{"taskId":"t-1","status":"working","pollInterval":` + poll + `}`, 0
					}
					return `{"taskId":"t-1","status":"completed"}`, 0
				case "tasks/result":
					return doneResult, 0
				}
				return `{}`, 0
			})
			r := h.m.Dispatch(context.Background(), "loose", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
			if r.Error != nil || !strings.Contains(string(r.Result), `"done"`) {
				t.Errorf("pollInterval %s: %+v %s, want the task's result", poll, r.Error, r.Result)
			}
		})
	}
}

// TestTaskGetTransientFailure: one tasks/get that failed (an HTTP 503 from a proxy) ended the
// call outcome_unknown at once, leaving the task to run unobserved and its result unfetched.
func TestTaskGetTransientFailure(t *testing.T) {
	var gets atomic.Int32
	h, _ := runShim(t, "flaky", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
		switch method {
		case "tools/call":
			return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
		case "tasks/get":
			switch gets.Add(1) {
			case 1:
				return "", http.StatusServiceUnavailable
			case 2:
				return `{"taskId":"t-1","status":"working","pollInterval":100}`, 0
			}
			return `{"taskId":"t-1","status":"completed"}`, 0
		case "tasks/result":
			return doneResult, 0
		}
		return `{}`, 0
	})
	r := h.m.Dispatch(context.Background(), "flaky", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
	if r.Error != nil || !strings.Contains(string(r.Result), `"done"`) {
		t.Errorf("a task whose tasks/get failed once: %+v %s, want its result", r.Error, r.Result)
	}
}

// TestTaskGetRefusedRPCBody: a tasks/get refused HTTP 429 (or 403, 405, 415) with a JSON-RPC
// error for its body, as a rate limiter in front of the server writes one, was taken for the
// server's word about the task: the task, still working, was cancelled and the call ended
// protocol_error, where the same refusal with a text body is asked again. The status says what
// happened whatever the body (refusedRPCError), as for the tools/call itself.
func TestTaskGetRefusedRPCBody(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			var gets atomic.Int32
			h, shim := runShim(t, "limited", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
				switch method {
				case "tools/call":
					return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
				case "tasks/get":
					if gets.Add(1) == 1 {
						return `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Too many requests"}}`, status
					}
					return `{"taskId":"t-1","status":"completed"}`, 0
				case "tasks/result":
					return doneResult, 0
				}
				return `{}`, 0
			})
			r := h.m.Dispatch(context.Background(), "limited", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
			if r.Error != nil || !strings.Contains(string(r.Result), `"done"`) {
				t.Errorf("a task whose tasks/get was refused %d once: %+v %s, want its result (%v)", status, r.Error, r.Result, shim.methods())
			}
		})
	}
}

// TestTaskGetOtherTask: a tasks/get answer about another task was read as this one's status
// (here: cancelled, so the call ended without cancelling its own task, still working).
func TestTaskGetOtherTask(t *testing.T) {
	h, shim := runShim(t, "other", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
		switch method {
		case "tools/call":
			return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
		case "tasks/get":
			return `{"taskId":"t-2","status":"cancelled","statusMessage":"someone else's"}`, 0
		case "tasks/cancel":
			return `{"taskId":"t-1","status":"cancelled"}`, 0
		}
		return `{}`, 0
	})
	r := h.m.Dispatch(context.Background(), "other", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || strings.Contains(r.Error.Message, "someone else's") {
		t.Errorf("tasks/get about another task: %+v %s, want protocol_error", r.Error, r.Result)
	}
	waitUntil(t, "tasks/cancel of t-1", func() bool {
		for _, m := range shim.methods() {
			if m == "tasks/cancel t-1" {
				return true
			}
		}
		return false
	})
}

// TestTaskStatusRedacted: an unknown status was cut to 64 bytes before the dispatch reply was
// redacted, so a secret across the cut was no longer found whole and its start went out; a
// status message was not bounded at all.
func TestTaskStatusRedacted(t *testing.T) {
	const secret = "S3cr3t-v4lue-0123456789"
	status := strings.Repeat("x", 55) + secret
	message := strings.Repeat("m", 2<<20)
	for _, tc := range []struct{ name, task string }{
		{"status", `{"taskId":"t-1","status":"` + status + `"}`},
		{"message", `{"taskId":"t-1","status":"cancelled","statusMessage":"` + message + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := runShim(t, "red", ServerConfig{Secrets: []string{secret}}, func(method string, _ json.RawMessage) (string, int) {
				switch method {
				case "tools/call":
					return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
				case "tasks/get":
					return tc.task, 0
				}
				return `{}`, 0
			})
			r := dispatch(t, h, "red", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
			if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || strings.Contains(r.Error.Message, secret[:6]) || len(r.Error.Message) > 4096 {
				t.Errorf("%s: %s… (%d bytes), want a bounded protocol_error without the secret", tc.name, truncate(r.Error.Error(), 200), len(r.Error.Message))
			}
		})
	}
}

// TestTaskDeadlineCancels: a task that never ends is cancelled (tasks/cancel) once the call's
// timeout passes, and the call ends timeout.
func TestTaskDeadlineCancels(t *testing.T) {
	h, shim := runShim(t, "endless", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
		switch method {
		case "tools/call":
			return `{"task":{"taskId":"t/1 é\"x","status":"working","pollInterval":0}}`, 0
		case "tasks/get":
			return `{"taskId":"t/1 é\"x","status":"working","pollInterval":0}`, 0
		case "tasks/cancel":
			return `{"taskId":"t/1 é\"x","status":"cancelled"}`, 0
		}
		return `{}`, 0
	})
	start := time.Now()
	r := h.m.Dispatch(context.Background(), "endless", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 1500})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Errorf("endless task: %+v %s", r.Error, r.Result)
	}
	if time.Since(start) > waitLimit {
		t.Errorf("the call took %s", time.Since(start))
	}
	waitUntil(t, "tasks/cancel", func() bool {
		for _, m := range shim.methods() {
			if m == `tasks/cancel t/1 é"x` {
				return true
			}
		}
		return false
	})
}

// TestTaskBrokenAnswerHTTP: over streamable HTTP, a task's tools/call, tasks/get or
// tasks/result answered with a JSON body that is not valid JSON (a NaN) ended outcome_unknown
// ("the connection failed": the executor retries a read-only tool's), tasks/get only after
// being asked again until the failures in a row ran out; as on stdio and for a plain
// tools/call it is the server's broken protocol: protocol_error at once, with where it breaks.
func TestTaskBrokenAnswerHTTP(t *testing.T) {
	for _, broken := range []string{"tools/call", "tasks/get", "tasks/result"} {
		t.Run(strings.ReplaceAll(broken, "/", "-"), func(t *testing.T) {
			h, shim := runShim(t, "brokentask", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
				if method == broken {
					return `{"x":NaN}`, 0
				}
				switch method {
				case "tools/call":
					return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
				case "tasks/get":
					return `{"taskId":"t-1","status":"completed"}`, 0
				case "tasks/result":
					return doneResult, 0
				}
				return `{}`, 0
			})
			r := h.m.Dispatch(context.Background(), "brokentask", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
			if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "not valid JSON") {
				t.Fatalf("got %+v %s, want protocol_error: not valid JSON", r.Error, r.Result)
			}
			if broken == "tasks/get" {
				waitUntil(t, "tasks/cancel of t-1", func() bool { return slices.Contains(shim.methods(), "tasks/cancel t-1") })
				if n := strings.Count(strings.Join(shim.methods(), "\n"), "tasks/get t-1"); n != 1 {
					t.Errorf("tasks/get sent %d times, want once: %v", n, shim.methods())
				}
			}
		})
	}
}
