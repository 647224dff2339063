package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// retryAfterShim answers a task's first tasks/get HTTP status with a Retry-After header (the
// body a text, or a rate limiter's JSON-RPC error), the rest as the taskShim under it does, and
// records when each tasks/get came and when the refusal went out.
type retryAfterShim struct {
	next       http.Handler
	status     int
	retryAfter string
	rpcBody    bool
	// cancelStatus, when set, answers every tasks/cancel with that status and the Retry-After
	// (a rate limiter refusing the cancellation too).
	cancelStatus int

	mu      sync.Mutex
	gets    []time.Time // arrival of each tasks/get
	refused time.Time   // when the refusal was written
	cancels int         // tasks/cancel seen
}

func (s *retryAfterShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Method == "tasks/cancel" {
			s.mu.Lock()
			s.cancels++
			s.mu.Unlock()
			if s.cancelStatus != 0 {
				w.Header().Set("Retry-After", s.retryAfter)
				http.Error(w, "slow down", s.cancelStatus)
				return
			}
		}
		if m.Method == "tasks/get" {
			s.mu.Lock()
			s.gets = append(s.gets, time.Now())
			first := len(s.gets) == 1
			s.mu.Unlock()
			if first {
				w.Header().Set("Retry-After", s.retryAfter)
				if s.rpcBody {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(s.status)
					_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Too many requests"}}`)
				} else {
					http.Error(w, "slow down", s.status)
				}
				s.mu.Lock()
				s.refused = time.Now()
				s.mu.Unlock()
				return
			}
		}
	}
	s.next.ServeHTTP(w, r)
}

func (s *retryAfterShim) times() ([]time.Time, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.gets...), s.refused
}

func (s *retryAfterShim) cancelCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels
}

// runRetryAfterShim starts a connector (2025-11-25) on a retryAfterShim over a taskShim whose
// task "research" polls every 100 ms and completes at the second tasks/get it answers.
func runRetryAfterShim(t *testing.T, name string, ra *retryAfterShim) (*harness, *taskShim) {
	t.Helper()
	h, shim, _ := runRetryAfterShimWith(t, name, ra, 100, false)
	return h, shim
}

// runRetryAfterShimWith is runRetryAfterShim with the task created with pollInterval poll (ms),
// and, when logged, the connector's log (debug level) in the buffer returned.
func runRetryAfterShimWith(t *testing.T, name string, ra *retryAfterShim, poll int, logged bool) (*harness, *taskShim, *logBuffer) {
	t.Helper()
	var runs, gets atomic.Int32
	shim := &taskShim{next: server.NewStreamableHTTPServer(taskServer(&runs)), answer: func(method string, _ json.RawMessage) (string, int) {
		switch method {
		case "tools/call":
			return `{"task":{"taskId":"t-1","status":"working","pollInterval":` + strconv.Itoa(poll) + `}}`, 0
		case "tasks/get":
			if gets.Add(1) < 2 {
				return `{"taskId":"t-1","status":"working","pollInterval":100}`, 0
			}
			return `{"taskId":"t-1","status":"completed"}`, 0
		case "tasks/result":
			return doneResult, 0
		case "tasks/cancel":
			return `{"taskId":"t-1","status":"cancelled"}`, 0
		}
		return `{}`, 0
	}}
	ra.next = shim
	ts := httptest.NewServer(ra)
	t.Cleanup(ts.Close)
	cfg := fastConfig(ServerConfig{Name: name, URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"})
	var h *harness
	var logs *logBuffer
	if logged {
		h, logs = runLogged(t, cfg)
	} else {
		h = run(t, nil, cfg)
	}
	waitUntil(t, "ready", func() bool { return h.m.Statuses()[name].Status == subjects.StatusReady })
	return h, shim, logs
}

// TestTaskGetRetryAfter: a tasks/get refused HTTP 429 (or 503) with a Retry-After was asked
// again at the task's own pollInterval (100 ms), however long the server asked to be left
// alone: a server shedding load was hammered. The next tasks/get waits at least the
// Retry-After, and the task's result is had.
func TestTaskGetRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		rpcBody bool
	}{
		{"429-text", http.StatusTooManyRequests, false},
		{"429-rpc", http.StatusTooManyRequests, true},
		{"503-text", http.StatusServiceUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ra := &retryAfterShim{status: tc.status, retryAfter: "1", rpcBody: tc.rpcBody}
			h, shim := runRetryAfterShim(t, "shedding", ra)
			r := h.m.Dispatch(context.Background(), "shedding", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 20000})
			if r.Error != nil || !strings.Contains(string(r.Result), `"done"`) {
				t.Fatalf("a task whose tasks/get was refused %d once: %+v %s, want its result (%v)", tc.status, r.Error, r.Result, shim.methods())
			}
			gets, refused := ra.times()
			if len(gets) < 2 {
				t.Fatalf("%d tasks/get, want at least 2", len(gets))
			}
			if early := gets[1].Sub(refused); early < time.Second {
				t.Errorf("the tasks/get after the refusal with Retry-After: 1 came %s after it, want at least 1s", early)
			}
		})
	}
}

// TestTaskGetRetryAfterPastDeadline: a tasks/get refused HTTP 429 with a Retry-After past the
// call's deadline is not asked again before then: the task is cancelled and the call ends
// timeout (as one whose deadline passes while it polls), with the server's Retry-After.
func TestTaskGetRetryAfterPastDeadline(t *testing.T) {
	ra := &retryAfterShim{status: http.StatusTooManyRequests, retryAfter: "3600"}
	h, shim := runRetryAfterShim(t, "shedding", ra)
	r := h.m.Dispatch(context.Background(), "shedding", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 3000})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Fatalf("a task whose tasks/get was refused with a Retry-After past the deadline: %+v %s, want timeout", r.Error, r.Result)
	}
	if gets, _ := ra.times(); len(gets) != 1 {
		t.Errorf("%d tasks/get, want 1: the server asked not to be asked again before the deadline", len(gets))
	}
	if !strings.Contains(r.Error.Message, "Retry-After") {
		t.Errorf("message %q does not say why", r.Error.Message)
	}
	if r.Error.RetryAfterMs <= 0 {
		t.Errorf("retryAfterMs %d, want the server's Retry-After", r.Error.RetryAfterMs)
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

// TestTaskPollPastDeadlineAfterRetryAfter: a tasks/get refused HTTP 429 with a Retry-After
// (1 s) well within the deadline, but with the task's pollInterval (4 s) running past it, ended
// the call timeout at once, saying the server's Retry-After ran past the deadline, with that
// Retry-After as retryAfterMs: neither was true. The Retry-After is over before the deadline,
// and a pollInterval that runs past the deadline is waited out as without a Retry-After: the
// call ends timeout when its deadline passes (no retryAfterMs), the task cancelled, and no
// tasks/get is sent again before then.
func TestTaskPollPastDeadlineAfterRetryAfter(t *testing.T) {
	ra := &retryAfterShim{status: http.StatusTooManyRequests, retryAfter: "1"}
	// The first tasks/get comes after 4 s, leaving 3 s: more than the Retry-After (by 2 s, room
	// for a slow machine), less than the pollInterval (by 1 s).
	h, shim, _ := runRetryAfterShimWith(t, "shedding", ra, 4000, false)
	r := h.m.Dispatch(context.Background(), "shedding", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 7000})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Fatalf("got %+v %s, want timeout", r.Error, r.Result)
	}
	if strings.Contains(r.Error.Message, "Retry-After") || r.Error.RetryAfterMs != 0 {
		t.Errorf("timeout %q with retryAfterMs %d: the Retry-After (1 s) did not run past the deadline, the pollInterval did", r.Error.Message, r.Error.RetryAfterMs)
	}
	if !strings.Contains(r.Error.Message, "no answer within 7s") {
		t.Errorf("message %q, want the deadline's", r.Error.Message)
	}
	if gets, _ := ra.times(); len(gets) != 1 {
		t.Errorf("%d tasks/get, want 1: the next was due after the deadline", len(gets))
	}
	waitUntil(t, "tasks/cancel of t-1", func() bool { return slices.Contains(shim.methods(), "tasks/cancel t-1") })
}

// TestTaskCancelRefused: the tasks/cancel sent when a tasks/get's Retry-After ran past the
// deadline was itself refused HTTP 429 (the rate limiter still shedding): the refusal went
// unseen, nothing in the log said the task was left running on the server. It is sent once
// (best effort, never again: the server asked not to be asked), its refusal logged, and the
// call still ends timeout with the server's Retry-After.
func TestTaskCancelRefused(t *testing.T) {
	ra := &retryAfterShim{status: http.StatusTooManyRequests, retryAfter: "3600", cancelStatus: http.StatusTooManyRequests}
	h, _, logs := runRetryAfterShimWith(t, "shedding", ra, 100, true)
	r := h.m.Dispatch(context.Background(), "shedding", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 3000})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout || r.Error.RetryAfterMs <= 0 {
		t.Fatalf("got %+v %s, want timeout with the server's Retry-After", r.Error, r.Result)
	}
	// The log line comes once the tasks/cancel was answered: nothing is sent after it.
	waitUntil(t, "the refused tasks/cancel logged", func() bool {
		return strings.Contains(logs.String(), "tasks/cancel")
	})
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "tasks/cancel") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
		}
	}
	if line["level"] != "warn" || line["status"] != float64(http.StatusTooManyRequests) || line["task"] != "t-1" {
		t.Errorf("log line %v, want a warning with the task and the status 429", line)
	}
	if ra, _ := line["retryAfterMs"].(float64); ra <= 0 {
		t.Errorf("log line %v without the refusal's Retry-After", line)
	}
	if n := ra.cancelCount(); n != 1 {
		t.Errorf("%d tasks/cancel, want 1", n)
	}
	if gets, _ := ra.times(); len(gets) != 1 {
		t.Errorf("%d tasks/get, want 1", len(gets))
	}
}

// TestTaskCancelAfterTaskEnded: a tasks/cancel that the server refuses because the task had
// already ended (-32602, as the spec has it for a task in a terminal status or one it does not
// know: a task that completed as the call's deadline passed) was logged as a warning that the
// task "may run on the server until its ttl passes", which is not so. It is logged below
// warning, with the server's word, and not sent again; a cancellation refused otherwise (-32603)
// still warns.
func TestTaskCancelAfterTaskEnded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cancel   string
		msg      string
		code     float64
		wantWarn bool
	}{
		{"ended", `{"code":-32602,"message":"Cannot cancel task: already in terminal status 'completed'"}`, "already in terminal status", -32602, false},
		{"failed", `{"code":-32603,"message":"internal error"}`, "internal error", -32603, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, shim, logs := runShimWith(t, "ended", ServerConfig{}, func(method string, _ json.RawMessage) (string, int) {
				switch method {
				case "tools/call":
					return `{"task":{"taskId":"t-1","status":"working","pollInterval":100}}`, 0
				case "tasks/get":
					return `{"taskId":"t-1","status":"working","pollInterval":100}`, 0
				case "tasks/cancel":
					return tc.cancel, rpcErrorAnswer
				}
				return `{}`, 0
			}, true)
			r := h.m.Dispatch(context.Background(), "ended", subjects.DispatchRequest{V: 1, Tool: "research", TimeoutMs: 600})
			if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
				t.Fatalf("got %+v %s, want timeout", r.Error, r.Result)
			}
			waitUntil(t, "the refused tasks/cancel logged", func() bool {
				return strings.Contains(logs.String(), "tasks/cancel")
			})
			var line map[string]any
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "tasks/cancel") {
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatalf("log line %q: %v", l, err)
					}
				}
			}
			msg, _ := line["message"].(string)
			if warned := line["level"] == "warn"; warned != tc.wantWarn {
				t.Errorf("log line %v: warning %v, want %v", line, warned, tc.wantWarn)
			}
			if !tc.wantWarn && strings.Contains(msg, "may run on") {
				t.Errorf("log line %v says the ended task may run on", line)
			}
			if line["task"] != "t-1" || !strings.Contains(fmt.Sprint(line["reason"]), tc.msg) ||
				line["code"] != tc.code {
				t.Errorf("log line %v, want the task and the server's error", line)
			}
			if n := strings.Count(strings.Join(shim.methods(), "\n"), "tasks/cancel"); n != 1 {
				t.Errorf("%d tasks/cancel, want 1", n)
			}
		})
	}
}
