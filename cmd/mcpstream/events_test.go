package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func publish(t *testing.T, js jetstream.JetStream, subject string, payload any) {
	t.Helper()
	var data []byte
	switch p := payload.(type) {
	case []byte:
		data = p
	default:
		var err error
		if data, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, data); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}

func tools(names ...string) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(names))
	for _, n := range names {
		out = append(out, json.RawMessage(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n)))
	}
	return out
}

func snapshot(server string, kind subjects.Kind, at time.Time, items []json.RawMessage) subjects.Snapshot {
	ttl := int64(30000)
	return subjects.Snapshot{
		V: 1, Type: subjects.EventSnapshot, Server: server, Kind: kind, Fingerprint: fmt.Sprintf("fp-%s-%d", server, at.Unix()),
		ListedAt: at, Pages: 1, TTLMs: &ttl, Items: items,
		Info: &subjects.ServerInfo{Description: server + " demo", Transport: "stdio", Protocol: "2026-07-28"},
	}
}

func status(server, st string, at time.Time) subjects.Status {
	return subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: st, Transport: "stdio", Protocol: "2026-07-28", At: at}
}

// seedRegistry publishes a small, hand-written registry history (with one malformed and one
// lying event) and returns the test server.
func seedRegistry(t *testing.T) *natstest.Env {
	t.Helper()
	env := natstest.Start(t)
	js := env.JS
	publish(t, js, subjects.RegistryStatus("logging"), status("logging", subjects.StatusConnecting, t0))
	publish(t, js, subjects.RegistrySnapshot("logging", subjects.KindTools), snapshot("logging", subjects.KindTools, t0, tools("getLogs", "getLogStats")))
	publish(t, js, subjects.RegistryStatus("logging"), status("logging", subjects.StatusReady, t0.Add(time.Second)))
	publish(t, js, subjects.RegistrySnapshot("ticketing", subjects.KindTools), snapshot("ticketing", subjects.KindTools, t0, tools("createIssue", "listIssues", "closeIssue")))
	publish(t, js, subjects.RegistryStatus("ticketing"), status("ticketing", subjects.StatusReady, t0.Add(time.Second)))
	publish(t, js, subjects.RegistryChanged("ticketing", subjects.KindTools), subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: "ticketing", Kind: subjects.KindTools, At: t0.Add(time.Minute)})
	publish(t, js, subjects.RegistrySnapshot("ticketing", subjects.KindTools), snapshot("ticketing", subjects.KindTools, t0.Add(time.Minute), tools("createIssue", "closeIssue", "assignIssue")))
	publish(t, js, subjects.RegistryStatus("kb"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "kb", Status: subjects.StatusUnavailable,
		Code: subjects.CodeConnectionLost, Reason: "child exited:\n\x1b[31mkilled\x1b[0m", Attempt: 2, RetryInMs: 500, At: t0.Add(2 * time.Minute)})
	publish(t, js, subjects.RegistrySnapshot("old", subjects.KindTools), snapshot("old", subjects.KindTools, t0, tools("legacy")))
	publish(t, js, subjects.RegistryStatus("old"), status("old", subjects.StatusRemoved, t0.Add(3*time.Minute)))
	publish(t, js, subjects.RegistryStatus("evil"), []byte("not json {"))
	publish(t, js, subjects.RegistryStatus("liar"), status("someone-else", subjects.StatusReady, t0))
	publish(t, js, subjects.RegistryConfirmed("ticketing", subjects.KindTools), subjects.Confirmed{V: 1, Type: subjects.EventConfirmed,
		Server: "ticketing", Kind: subjects.KindTools, Fingerprint: "fp-ticketing", ListedAt: t0.Add(4 * time.Minute)})
	return env
}

// stamp matches the stream timestamps, which differ on every run.
var stamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

func normalize(s string) string {
	// Payload times are fixed (2026-03-01); only stream timestamps change.
	return stamp.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "2026-03-01") {
			return m
		}
		return "TIME"
	})
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/mcpstream -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after an intended change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// runCmd runs one mcpstream command in-process.
func runCmd(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(ctx, args, &o, &e)
	return o.String(), e.String(), err
}

func TestEventsAndServersGolden(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		golden string
		args   []string
	}{
		{"events.txt", []string{"events"}},
		{"events.jsonl", []string{"events", "--json"}},
		{"events_ticketing.txt", []string{"events", "--server", "ticketing"}},
		{"events_status.txt", []string{"events", "--subject", "registry.*.status", "--since", "1h"}},
		{"servers.txt", []string{"servers"}},
		{"servers.json", []string{"servers", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, ctx, append(tt.args, "--nats", env.URL)...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tt.args, err, errOut)
			}
			golden(t, tt.golden, normalize(out))
		})
	}
}

func TestEventsJSONLines(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "events", "--json", "--since", "1h", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 13 {
		t.Fatalf("got %d lines, want 13", len(lines))
	}
	for i, l := range lines {
		var ev struct {
			Seq     uint64          `json:"seq"`
			Subject string          `json:"subject"`
			Time    string          `json:"time"`
			Event   json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, l)
		}
		if ev.Seq != uint64(i+1) || ev.Subject == "" || len(ev.Event) == 0 {
			t.Errorf("line %d = %s", i, l)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
			t.Errorf("line %d time: %v", i, err)
		}
	}
	// --since in the future: nothing, and a clean exit.
	out, _, err = runCmd(t, ctx, "events", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--nats", env.URL)
	if err != nil || out != "" {
		t.Errorf("events --since future = %q, %v; want nothing", out, err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 50ms, at most n times.
func waitFor(t *testing.T, what string, n int, cond func() bool) {
	t.Helper()
	for range n {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestEventsFollow(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"events", "--follow", "--nats", env.URL}, &out, &errOut) }()
	publish(t, env.JS, subjects.RegistryStatus("kb"), status("kb", subjects.StatusReady, t0))
	waitFor(t, "the followed event", 200, func() bool { return strings.Contains(out.String(), "kb status ready") })
	publish(t, env.JS, subjects.RegistryChanged("kb", subjects.KindTools), subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: "kb", Kind: subjects.KindTools, At: t0})
	waitFor(t, "the second event", 200, func() bool { return strings.Contains(out.String(), "kb changed tools") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("events --follow returned %v, want nil on interrupt (stderr %s)", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --follow did not stop after cancel")
	}
}

func TestEventsEmptyStream(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{{"events"}, {"events", "--subject", "audit.>"}, {"servers", "--json"}} {
		out, _, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if want := map[bool]string{true: "[]\n", false: ""}[args[0] == "servers"]; out != want {
			t.Errorf("%v printed %q, want %q", args, out, want)
		}
	}
}

func TestEventsAuditAndResults(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish(t, env.JS, subjects.Audit("acme", "request"), subjects.AuditEvent{V: 1, Type: "audit.request", CallID: "c1", Tenant: "acme", User: "alice", Tool: "kb__get_document", At: t0})
	publish(t, env.JS, subjects.Result("acme", "c1"), subjects.CallResult{V: 1, ID: "c1", Tenant: "acme", Tool: "kb__get_document", Status: subjects.CallRefused,
		Error: &subjects.Error{Code: subjects.CodeForbidden, Message: "denied by rule 1"}})
	out, _, err := runCmd(t, ctx, "events", "--subject", "audit.>", "--nats", env.URL)
	if err != nil || !strings.Contains(out, "audit.request call=c1 tenant=acme user=alice tool=kb__get_document") {
		t.Errorf("audit: %q, %v", out, err)
	}
	out, _, err = runCmd(t, ctx, "events", "--stream", "results", "--nats", env.URL)
	if err != nil || !strings.Contains(out, "result call=c1 tenant=acme tool=kb__get_document status=refused code=forbidden: denied by rule 1") {
		t.Errorf("results: %q, %v", out, err)
	}
}

func TestPickStream(t *testing.T) {
	tests := []struct {
		stream  string
		filters []string
		want    string
		subs    []string
		err     string
	}{
		{want: subjects.RegistryStream, subs: []string{}},
		{stream: "audit", want: subjects.AuditStream, subs: []string{}},
		{stream: subjects.ResultsStream, want: subjects.ResultsStream, subs: []string{}},
		{filters: []string{"registry.*.status"}, want: subjects.RegistryStream, subs: []string{"mcpstream.v1.registry.*.status"}},
		{filters: []string{"mcpstream.v1.audit.acme.>"}, want: subjects.AuditStream, subs: []string{"mcpstream.v1.audit.acme.>"}},
		// A filter another covers is dropped (a JetStream consumer refuses it), a repeated one
		// too; filters that overlap in part stay.
		{filters: []string{"results.>", "results.acme.*"}, want: subjects.ResultsStream, subs: []string{"mcpstream.v1.results.>"}},
		{filters: []string{"results.acme.*", "mcpstream.v1.results.>"}, want: subjects.ResultsStream, subs: []string{"mcpstream.v1.results.>"}},
		{filters: []string{"audit.*.decision", "audit.acme.*", "audit.*.decision"}, want: subjects.AuditStream, subs: []string{"mcpstream.v1.audit.*.decision", "mcpstream.v1.audit.acme.*"}},
		{stream: "nope", err: `--stream "nope": want registry, results or audit`},
		{filters: []string{"calls.acme"}, err: "calls is a work queue"},
		{filters: []string{">"}, err: "a filter must stay within one stream"},
		{filters: []string{"catalog.search"}, err: "catalog subjects are request/reply"},
		{filters: []string{"registry.>", "audit.>"}, err: "is not in stream MCPSTREAM_REGISTRY"},
		{filters: []string{"mcpstream.v2.registry.>"}, err: "not under mcpstream.v1"},
		{filters: []string{"registry.>.x"}, err: "not a NATS subject filter"},
		{stream: "audit", filters: []string{"registry.>"}, err: "is not in stream MCPSTREAM_AUDIT"},
	}
	for _, tt := range tests {
		name, subs, err := pickStream(tt.stream, tt.filters)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrBadFilter) {
				t.Errorf("pickStream(%q, %q) error = %v, want %q", tt.stream, tt.filters, err, tt.err)
			}
			continue
		}
		if err != nil || name != tt.want || strings.Join(subs, " ") != strings.Join(tt.subs, " ") {
			t.Errorf("pickStream(%q, %q) = %q, %q, %v; want %q, %q", tt.stream, tt.filters, name, subs, err, tt.want, tt.subs)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  bool
	}{
		{in: ""},
		{in: "1h", want: now.Add(-time.Hour)},
		{in: "90s", want: now.Add(-90 * time.Second)},
		{in: "2026-04-30T08:00:00Z", want: time.Date(2026, 4, 30, 8, 0, 0, 0, time.UTC)},
		{in: "-1h", err: true},
		{in: "yesterday", err: true},
	}
	for _, tt := range tests {
		got, err := parseSince(tt.in, now)
		if tt.err != (err != nil) || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestClientErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A free port with no server: a clear error naming the URL and the fix.
	_, _, err := runCmd(t, ctx, "servers", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "connect to NATS at nats://127.0.0.1:1") || !strings.Contains(err.Error(), "MCPSTREAM_NATS") {
		t.Errorf("servers against nothing: %v", err)
	}
	_, errOut, err := runCmd(t, ctx, "events", "--bogus")
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errOut, "flag provided but not defined: -bogus") {
		t.Errorf("bad flag: %v, %q", err, errOut)
	}
	out, _, err := runCmd(t, ctx, "events", "--help")
	if err != nil || !strings.Contains(out, "Usage: mcpstream events") || !strings.Contains(out, "--since") && !strings.Contains(out, "-since") {
		t.Errorf("events --help: %v, %q", err, out)
	}
}

func TestParseFlagsInterspersed(t *testing.T) {
	var cf clientFlags
	fs := newFlagSet("call", "call TOOL ARGS", "")
	cf.register(fs, true)
	var o, e bytes.Buffer
	rest, err := parseFlags(fs, []string{"kb__search", "--json", `{"q":1}`, "--principal", "acme/alice", "--", "--literal"}, &o, &e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rest, " ") != `kb__search {"q":1} --literal` || !cf.JSON {
		t.Errorf("rest = %q, json = %v", rest, cf.JSON)
	}
	p, err := cf.principal()
	if err != nil || p.Tenant != "acme" || p.User != "alice" {
		t.Errorf("principal = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "acme/", "/alice", "a/b/c"} {
		if _, err := parsePrincipal(bad, ""); !errors.Is(err, ErrBadPrincipal) {
			t.Errorf("parsePrincipal(%q) = %v, want ErrBadPrincipal", bad, err)
		}
	}
}
