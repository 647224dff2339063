package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// refusingCalls answers every POST carrying a tools/call with status (and Retry-After, when
// set) while status is not 0, as a rate limiter, a WAF or a body-size limit in front of the
// server does: the server never sees the call.
type refusingCalls struct {
	next       http.Handler
	status     atomic.Int32
	retryAfter string
	// rpcBody: the refusal's body is a JSON-RPC error with a null id, as rate limiters and the
	// TypeScript SDK's transport write one, not text.
	rpcBody bool
}

func (r *refusingCalls) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if st := int(r.status.Load()); st != 0 && req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			if r.retryAfter != "" {
				w.Header().Set("Retry-After", r.retryAfter)
			}
			if r.rpcBody {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(st)
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"refused by the gateway"},"id":null}`)
				return
			}
			http.Error(w, "refused by the gateway", st)
			return
		}
	}
	r.next.ServeHTTP(w, req)
}

// echoCounted is a fixture whose echo tool counts its runs.
func echoCounted(ran *atomic.Int32) *server.MCPServer {
	srv := newFixture(fixtureOptions{})
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return mcp.NewToolResultText("ran"), nil
		})
	return srv
}

// A tools/call the server (or what stands in front of it) answers with a 4xx that says it was
// not processed — 429, 403, 413, 400... — did not run: it used to be answered outcome_unknown
// ("may have run"), as mcp-go reports these statuses as error text only. It is refused with a
// code the executor takes as nothing sent (429 with the server's Retry-After); a 5xx, 503
// included, stays outcome_unknown (the server may have run it: TestProxy503AfterForwardMayHaveRun).
func TestHTTPRefusedCallNotRun(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		code       string
		retryMs    int64
	}{
		{http.StatusTooManyRequests, "7", subjects.CodeUnavailable, 7000},
		{http.StatusForbidden, "", subjects.CodeUnavailable, 0},
		// outcome_unknown, but with the server's Retry-After: the executor retries a read-only
		// tool's unknown outcome, and must not do so before the server asked (see
		// TestRetryHonoursRetryAfter), nor send it again in a tight loop.
		{http.StatusServiceUnavailable, "3", subjects.CodeOutcomeUnknown, 3000},
		{http.StatusRequestEntityTooLarge, "", subjects.CodeTooLarge, 0},
		{http.StatusBadRequest, "", subjects.CodeBadRequest, 0},
		{http.StatusUnprocessableEntity, "", subjects.CodeBadRequest, 0},
		{http.StatusUnsupportedMediaType, "", subjects.CodeUnavailable, 0},
		{http.StatusInternalServerError, "", subjects.CodeOutcomeUnknown, 0},
	}
	for _, sse := range []bool{false, true} {
		for _, tc := range cases {
			if sse && tc.status != http.StatusTooManyRequests && tc.status != http.StatusForbidden {
				continue
			}
			name := strconv.Itoa(tc.status)
			if sse {
				name = "sse-" + name
			}
			t.Run(name, func(t *testing.T) {
				var ran atomic.Int32
				srv := echoCounted(&ran)
				rf := &refusingCalls{retryAfter: tc.retryAfter}
				ts := httptest.NewServer(rf)
				t.Cleanup(ts.Close)
				sc := ServerConfig{Name: "gw", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}
				if sse {
					s := server.NewSSEServer(srv)
					server.WithBaseURL(ts.URL)(s)
					rf.next = s
					sc = ServerConfig{Name: "gw", Transport: TransportSSE, URL: ts.URL + "/sse"}
				} else {
					rf.next = server.NewStreamableHTTPServer(srv, server.WithStateful(true))
				}
				checkRefused(t, rf, sc, tc.status, tc.code, tc.retryMs, &ran)
			})
		}
	}
}

func checkRefused(t *testing.T, rf *refusingCalls, sc ServerConfig, status int, code string, retryMs int64, ran *atomic.Int32) {
	t.Helper()
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("gw"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rf.status.Store(int32(status))
	args := json.RawMessage(`{"text":"hi"}`)
	r := dispatch(t, h, "gw", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args})
	if r.Error == nil || r.Error.Code != code {
		t.Fatalf("got result %s, error %+v; want %s", r.Result, r.Error, code)
	}
	if code != subjects.CodeOutcomeUnknown && !strings.Contains(r.Error.Message, "HTTP "+strconv.Itoa(status)) {
		t.Errorf("message %q does not name the status", r.Error.Message)
	}
	if r.Error.RetryAfterMs != retryMs {
		t.Errorf("retryAfterMs = %d; want %d", r.Error.RetryAfterMs, retryMs)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
	// The session stays: once the gateway lets calls through, they run.
	rf.status.Store(0)
	if r := dispatch(t, h, "gw", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args}); r.Error != nil {
		t.Errorf("a call once the server takes it again: %+v", r.Error)
	}
}

// The same refusals with a JSON-RPC error as their body (a rate limiter's, the TypeScript SDK
// transport's): mcp-go decodes the body as the call's answer, and a 429 was the server's
// protocol_error, its Retry-After lost, though nothing ran; the status says what happened.
func TestHTTPRefusedCallNotRunRPCBody(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		code       string
		retryMs    int64
	}{
		{http.StatusTooManyRequests, "7", subjects.CodeUnavailable, 7000},
		{http.StatusForbidden, "", subjects.CodeUnavailable, 0},
		{http.StatusRequestEntityTooLarge, "", subjects.CodeTooLarge, 0},
		{http.StatusUnsupportedMediaType, "", subjects.CodeUnavailable, 0},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			var ran atomic.Int32
			rf := &refusingCalls{retryAfter: tc.retryAfter, rpcBody: true}
			rf.next = server.NewStreamableHTTPServer(echoCounted(&ran), server.WithStateful(true))
			ts := httptest.NewServer(rf)
			t.Cleanup(ts.Close)
			checkRefused(t, rf, ServerConfig{Name: "gw", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}, tc.status, tc.code, tc.retryMs, &ran)
		})
	}
}

// Retry-After is seconds or an HTTP date; a hostile server's is bounded, a malformed or past
// one is none.
func TestRetryAfterMs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]int64{
		"":                        0,
		"7":                       7000,
		" 0 ":                     0,
		"-3":                      0,
		"soon":                    0,
		"99999999999999999999999": 0, // past uint64: malformed
		"18446744073709551615":    time.Hour.Milliseconds(),
		now.Add(90 * time.Second).Format(http.TimeFormat): 90000,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
		now.AddDate(5, 0, 0).Format(http.TimeFormat):      time.Hour.Milliseconds(),
	} {
		if got := retryAfterMs(v, now); got != want {
			t.Errorf("retryAfterMs(%q) = %d; want %d", v, got, want)
		}
	}
}

// The status that counts is the first final answer to the request's POST: not a redirect the
// client follows, nor the answer to a POST mcp-go sends later with a context derived from the
// request's (its reply to a server request on the request's event stream).
func TestCaptureHTTPStatusFirstFinal(t *testing.T) {
	answer := func(status int) *http.Response { return &http.Response{StatusCode: status, Header: http.Header{}} }
	var cp capture
	cp.httpAnswered(answer(http.StatusTemporaryRedirect))
	cp.httpAnswered(answer(http.StatusOK))
	cp.httpAnswered(answer(http.StatusTooManyRequests))
	if st, _ := cp.httpStatus(); st != http.StatusOK {
		t.Errorf("status = %d; want 200", st)
	}
}
