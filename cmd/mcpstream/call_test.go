package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The text and --json output of every kind of answer, pinned by a golden file.
func TestPrintCallResult(t *testing.T) {
	ok := json.RawMessage(`{"content":[{"type":"text","text":"Created TCK-7 (high): Disk full"}],"structuredContent":{"id":"TCK-7"}}`)
	structured := json.RawMessage(`{"content":[{"type":"text","text":"{\"total\":2}"}],"structuredContent":{"total":2}}`)
	toolErr := json.RawMessage(`{"content":[{"type":"text","text":"document NOPE not found"}],"isError":true}`)
	image := json.RawMessage(`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`)
	cases := []struct {
		name string
		res  subjects.CallResult
	}{
		{"ok text", subjects.CallResult{ID: "c-1", Tool: "ticketing__createIssue", Status: subjects.CallOK, Result: ok}},
		{"ok structured", subjects.CallResult{ID: "c-2", Tool: "ticketing__listIssues", Status: subjects.CallOK, Result: structured}},
		{"ok non-text", subjects.CallResult{ID: "c-3", Tool: "x__img", Status: subjects.CallOK, Result: image}},
		{"isError", subjects.CallResult{ID: "c-4", Tool: "kb__get_document", Status: subjects.CallOK, Result: toolErr}},
		{"invalid arguments", subjects.CallResult{ID: "c-5", Tool: "ticketing__createIssue", Status: subjects.CallRefused,
			Error: &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "missing property 'body'", Path: "/body"}}},
		{"rate limited", subjects.CallResult{ID: "c-6", Tool: "kb__search_knowledge_base", Status: subjects.CallRefused,
			Error: &subjects.Error{Code: subjects.CodeRateLimited, Message: "tool kb__search_knowledge_base is limited to 2 calls per 1s", RetryAfterMs: 1500}}},
		{"outcome unknown", subjects.CallResult{ID: "c-7", Tool: "ticketing__createIssue", Status: subjects.CallFailed,
			Error: &subjects.Error{Code: subjects.CodeOutcomeUnknown, Message: "an earlier attempt of this call was dispatched and its result was never recorded"}}},
	}
	var all strings.Builder
	for _, tc := range cases {
		for _, asJSON := range []bool{false, true} {
			var out, errOut bytes.Buffer
			err := printCallResult(&out, &errOut, tc.res, asJSON)
			status := 0
			var code exitCode
			if errors.As(err, &code) {
				status = int(code)
			}
			fmt.Fprintf(&all, "== %s json=%v exit=%d\n-- stdout\n%s-- stderr\n%s", tc.name, asJSON, status, out.String(), errOut.String())
			if asJSON && out.Len() > 0 && !json.Valid(out.Bytes()) {
				t.Errorf("%s: --json output is not JSON: %s", tc.name, out.String())
			}
		}
	}
	golden(t, "call_output.golden", all.String())
}

// `call`, `approve` and `deny` against `up` with the demo servers, as a user runs them.
func TestCallCommand(t *testing.T) {
	p := startUp(t)
	waitFor(t, "up healthy", 600, func() bool { code, _ := p.healthz(t); return code == 200 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(args ...string) (string, string, int) {
		t.Helper()
		out, errOut, err := runCmd(t, ctx, append(append([]string{"call"}, args...), "--nats", p.nats)...)
		status := 0
		var code exitCode
		switch {
		case errors.As(err, &code):
			status = int(code)
		case err != nil:
			status, errOut = 1, errOut+err.Error()
		}
		return out, errOut, status
	}

	out, errOut, status := call("kb__search_knowledge_base", `{"query":"refund policy","topK":1}`, "--json")
	if status != 0 || !strings.Contains(out, `"structuredContent"`) {
		t.Fatalf("search: exit %d\n%s%s", status, out, errOut)
	}
	// A tenant's own inbox prefix (under _INBOX.: the worker answers it directly).
	out, errOut, status = call("kb__search_knowledge_base", `{"query":"refund policy","topK":1}`, "--json", "--nats-inbox", "_INBOX.acme")
	if status != 0 || !strings.Contains(out, `"structuredContent"`) {
		t.Fatalf("--nats-inbox _INBOX.acme: exit %d\n%s%s", status, out, errOut)
	}
	// Elsewhere: the front end relays the answer.
	out, errOut, status = call("kb__search_knowledge_base", `{"query":"refund policy","topK":1}`, "--json", "--nats-inbox", "_REPLIES.acme")
	if status != 0 || !strings.Contains(out, `"structuredContent"`) {
		t.Fatalf("--nats-inbox _REPLIES.acme: exit %d\n%s%s", status, out, errOut)
	}
	if _, errOut, status = call("kb__search_knowledge_base", `{}`, "--nats-inbox", "_INBOX.>"); status != 1 || !strings.Contains(errOut, "--nats-inbox") {
		t.Errorf("--nats-inbox with a wildcard: exit %d, %q; want a clear error", status, errOut)
	}
	out, _, status = call("nosuchserver__nosuchtool", "{}", "--json")
	var refusal struct {
		Error subjects.Error `json:"error"`
	}
	if status != 1 || json.Unmarshal([]byte(out), &refusal) != nil || refusal.Error.Code != subjects.CodeNotFound {
		t.Errorf("unknown tool: exit %d, %s; want exit 1 and not_found", status, out)
	}
	_, errOut, status = call("kb__search_knowledge_base", `{"query": 42}`)
	if status != 1 || !strings.HasPrefix(errOut, "invalid_arguments: ") || !strings.Contains(errOut, "path: /query") {
		t.Errorf("bad arguments: exit %d, stderr %q; want invalid_arguments at /query", status, errOut)
	}
	out, errOut, status = call("kb__get_document", `{"id":"NOPE"}`)
	if status != 1 || !strings.Contains(out, "not found") || !strings.Contains(errOut, "isError") {
		t.Errorf("isError: exit %d, stdout %q, stderr %q; want the tool's text and exit 1", status, out, errOut)
	}
	if _, errOut, status = call("kb__get_document", `not json`); status != 1 || !strings.Contains(errOut, "JSON object") {
		t.Errorf("bad ARGS_JSON: exit %d, %q", status, errOut)
	}
	// The same --id never runs twice: the second answer is the first one.
	first, _, _ := call("ticketing__createIssue", `{"title":"Disk full","body":"db-1","priority":"high"}`, "--id", "ticket-1", "--json")
	second, _, _ := call("ticketing__createIssue", `{"title":"Disk full","body":"db-1","priority":"high"}`, "--id", "ticket-1", "--json")
	if first == "" || first != second || !strings.Contains(first, "TCK-1") {
		t.Errorf("same --id: %s then %s; want one ticket TCK-1 twice", first, second)
	}

	// closeIssue is annotated destructive: it waits for approve or deny.
	for _, decide := range []string{"deny", "approve"} {
		t.Run(decide, func(t *testing.T) {
			id := "close-" + decide
			type answer struct {
				out, errOut string
				status      int
			}
			done := make(chan answer, 1)
			go func() {
				o, e, s := call("ticketing__closeIssue", `{"id":"TCK-1"}`, "--id", id)
				done <- answer{o, e, s}
			}()
			var a answer
			waitFor(t, decide+" accepted", 600, func() bool {
				select {
				case a = <-done:
					t.Fatalf("the call ended before the %s: exit %d, %s%s", decide, a.status, a.out, a.errOut)
				default:
				}
				out, _, err := runCmd(t, ctx, decide, id, "--reason", "test", "--nats", p.nats)
				return err == nil && strings.Contains(out, id)
			})
			a = <-done
			switch decide {
			case "deny":
				if a.status != 1 || !strings.HasPrefix(a.errOut, "denied: ") {
					t.Errorf("denied call: exit %d, stderr %q", a.status, a.errOut)
				}
			case "approve":
				if a.status != 0 || !strings.Contains(a.out, "Closed TCK-1") {
					t.Errorf("approved call: exit %d, %q %q", a.status, a.out, a.errOut)
				}
			}
			if _, _, err := runCmd(t, ctx, decide, id, "--nats", p.nats); err == nil {
				t.Errorf("a second %s of %s succeeded", decide, id)
			}
			// With --json, the error has the shape of every command's: {"code","message"}.
			out, _, _ := runCmd(t, ctx, decide, id, "--json", "--wait", "2s", "--nats", p.nats)
			var js struct {
				OK    bool
				Error *subjects.Error
			}
			if err := json.Unmarshal([]byte(out), &js); err != nil || js.OK || js.Error == nil || js.Error.Code != subjects.CodeNotFound {
				t.Errorf("a second %s --json: %q (%v), want ok false and error code not_found", decide, out, err)
			}
		})
	}

	// GET /metrics: the calls above are counted, the catalog and the servers are there.
	metrics := p.metrics(t)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^mcpstream_executor_calls_answered_total ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_calls_refused_total ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_ready 1$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_tool_errors_total ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_call_seconds_total [0-9.e-]+$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_tools\{replica="0"\} ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_ready\{replica="0"\} 1$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_stream_sequence\{replica="0"\} ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_lag\{replica="0"\} [0-9]+$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_value_log_bytes\{replica="0"\} [1-9][0-9.e+]*$`),
		regexp.MustCompile(`(?m)^mcpstream_catalog_value_log_gc_rewrites_total\{replica="0"\} [0-9]+$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_registry_sequence ([1-9][0-9]*)$`),
		regexp.MustCompile(`(?m)^mcpstream_executor_registry_lag [0-9]+$`),
		regexp.MustCompile(`(?m)^mcpstream_server_status\{server="kb",status="ready"\} 1$`),
		regexp.MustCompile(`(?m)^mcpstream_server_status\{server="kb",status="unavailable"\} 0$`),
		regexp.MustCompile(`(?m)^go_goroutines [1-9]`),
		regexp.MustCompile(`(?m)^process_resident_memory_bytes [1-9]`),
	} {
		if !want.MatchString(metrics) {
			t.Errorf("/metrics has no line matching %s", want)
		}
	}
}

func TestCallWithoutExecutor(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, stderr, err := runCmd(t, ctx, "call", "kb__search_knowledge_base", `{}`, "--nats", env.URL)
	if err == nil || !strings.Contains(stderr, "unavailable: ") || !strings.Contains(stderr, "no executor is serving") {
		t.Errorf("got %v, stderr %q; want exit 1 with code unavailable and 'no executor is serving'", err, stderr)
	}
	stdout, _, err := runCmd(t, ctx, "call", "kb__search_knowledge_base", `{}`, "--json", "--nats", env.URL)
	if err == nil || !strings.Contains(stdout, `"code": "unavailable"`) {
		t.Errorf("--json: got %v, stdout %q; want {\"error\":{\"code\":\"unavailable\"...}}", err, stdout)
	}
}
