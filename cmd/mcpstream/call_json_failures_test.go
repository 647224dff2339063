package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallJSONEveryFailure: `call --json` prints {"error":{"code","message"}} on stdout for a
// call refused or failed, and did so for the executor's answers and for no executor at all
// (unavailable), but a call that failed before or without an answer — NATS unreachable,
// ARGS_JSON not an object, a malformed --principal, NATS refusing the call's subjects — printed
// nothing on stdout (the error went to stderr as text), where search, inspect, servers and
// approve print the same JSON error: a script reading stdout had nothing to read. Each is
// the JSON error, with exit status 1, and the text output is unchanged.
func TestCallJSONEveryFailure(t *testing.T) {
	ns := startNATS(t, &server.Options{Users: []*server.User{
		{Username: "nopub", Password: "x", Permissions: &server.Permissions{
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"mcpstream.v1.exec.>"}}}},
	}})
	cases := []struct {
		name, code, text string
		args             []string
	}{
		{"NATS unreachable", subjects.CodeUnavailable, "no servers available",
			[]string{"kb__search_knowledge_base", "{}", "--nats", "nats://127.0.0.1:1"}},
		{"ARGS_JSON not an object", subjects.CodeBadRequest, "ARGS_JSON must be a JSON object",
			[]string{"kb__search_knowledge_base", "[1]", "--nats", "nats://127.0.0.1:1"}},
		{"empty tenant", subjects.CodeBadRequest, "bad principal",
			[]string{"kb__search_knowledge_base", "{}", "--principal", "/alice", "--nats", "nats://127.0.0.1:1"}},
		{"NATS refuses the exec subject", subjects.CodeForbidden, "permissions violation",
			[]string{"kb__search_knowledge_base", "{}", "--wait", "20s", "--nats", fmt.Sprintf("nats://nopub:x@%s", ns.Addr())}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, errOut, err := runCmd(t, ctx, append([]string{"call", "--json"}, tc.args...)...)
			var code exitCode
			var got struct {
				Error *subjects.Error `json:"error"`
			}
			if !errors.As(err, &code) || code != 1 || json.Unmarshal([]byte(out), &got) != nil || got.Error == nil ||
				got.Error.Code != tc.code || !strings.Contains(got.Error.Message, tc.text) {
				t.Errorf("--json: %v, stdout %q, stderr %q; want exit 1 and {\"error\":{\"code\":%q}} saying %q", err, out, lastLines(errOut, 2), tc.code, tc.text)
			}
			if strings.Contains(out, "x@") {
				t.Errorf("--json: the output shows the URL's password: %s", out)
			}
			// Text: the error as before (stderr, exit 1).
			out, errOut, err = runCmd(t, ctx, append([]string{"call"}, tc.args...)...)
			if err == nil || out != "" || !strings.Contains(err.Error()+errOut, tc.text) {
				t.Errorf("text: %v, stdout %q, stderr %q; want the error %q", err, out, lastLines(errOut, 2), tc.text)
			}
		})
	}
}
