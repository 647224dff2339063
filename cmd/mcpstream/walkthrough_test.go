package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// approvalWaits counts the needs_approval decisions recorded for call id: one each time a
// worker holds the call for a human.
func approvalWaits(t *testing.T, natsURL, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, errOut, err := runCmd(t, ctx, "events", "--json", "--subject", "audit.local.decision", "--nats", natsURL)
	if err != nil {
		t.Fatalf("events: %v\n%s", err, errOut)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l struct {
			Event subjects.AuditEvent `json:"event"`
		}
		if line != "" && json.Unmarshal([]byte(line), &l) == nil && l.Event.CallID == id && l.Event.Decision == subjects.CodeNeedsApproval {
			n++
		}
	}
	return n
}

// TestUpStopWhileCallAwaitsApproval: Ctrl-C of up while a destructive call waited for approval
// handed the call back with an immediate nak, which the stopping executor's own workers took
// and handed back again and again until the consumer's MaxDeliver: the call was lost. Handed
// back after a delay, it waits again in the restarted executor; once approved, the caller,
// still waiting, gets its answer (from the results stream if the reply came while its
// connection was away).
func TestUpStopWhileCallAwaitsApproval(t *testing.T) {
	p := startUp(t)
	p.waitDemoReady(t)
	waitFor(t, "/healthz 200", 1200, func() bool { code, _ := p.healthz(t); return code == http.StatusOK })
	listen := strings.TrimPrefix(p.nats, "nats://")

	const id = "c-handback-1"
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"call", "ticketing__closeIssue", `{"id":"TCK-1"}`, "--id", id, "--json", "--nats", p.nats}, &out, &errOut)
	}()
	waitFor(t, "the call waiting for approval", 600, func() bool {
		select {
		case err := <-done:
			t.Fatalf("call ended before its approval: %v\nstdout %s\nstderr %s", err, out.String(), errOut.String())
		default:
		}
		return approvalWaits(t, p.nats, id) == 1
	})

	if err := p.stop(t); err != nil {
		t.Fatalf("up: %v", err)
	}
	// The same store and port: the caller's connection comes back by itself.
	p2 := startUp(t, "--data", p.data, "--nats-listen", listen)
	waitFor(t, "the call waiting for approval again after the restart", 600, func() bool { return approvalWaits(t, p2.nats, id) >= 2 })

	actx, acancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer acancel()
	if _, aerr, err := runCmd(t, actx, "approve", id, "--nats", p2.nats); err != nil {
		t.Fatalf("approve: %v\n%s", err, aerr)
	}
	<-done // bounded by ctx
	var res struct {
		Content []json.RawMessage `json:"content"`
		Error   *subjects.Error   `json:"error"`
	}
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || res.Error != nil || len(res.Content) == 0 {
		t.Errorf("the call's answer is not the tool's result: %v\nstdout %s\nstderr %s", err, out.String(), errOut.String())
	}
}

// TestStreamsRetentionKeptWithoutSection: every process declared the results and audit streams
// with the defaults of the settings its configuration did not give, so the next start undid
// what an operator set with `nats stream edit` (a max_age, a max_bytes, a max_msgs). The
// settings the streams section names are applied; the others keep their value.
func TestStreamsRetentionKeptWithoutSection(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info := func(name string) jetstream.StreamConfig {
		t.Helper()
		s, err := env.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}
	edit := func(name string, f func(*jetstream.StreamConfig)) { // as `nats stream edit` does
		t.Helper()
		cfg := info(name)
		f(&cfg)
		if _, err := env.JS.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	edit(subjects.ResultsStream, func(c *jetstream.StreamConfig) { c.MaxAge = 2 * time.Hour })
	edit(subjects.AuditStream, func(c *jetstream.StreamConfig) { c.MaxBytes, c.MaxMsgs = 1<<30, 1_000_000 })
	// (Not the registry stream's: a bound on it stops every role, see
	// TestRegistryStreamBoundRefusedAtStart.)
	edit(subjects.CallsStream, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1000 })

	dir := t.TempDir()
	for i, streams := range []string{"", "streams: {resultsMaxBytes: 1GiB, auditMaxAge: 720h}\n"} {
		cfgPath := filepath.Join(dir, fmt.Sprintf("mcpstream-%d.yaml", i))
		if err := os.WriteFile(cfgPath, []byte("servers: []\n"+streams), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startRole(t, "executor", "--nats", env.URL, "--config", cfgPath, "--data", dir)
		res, audit, calls := info(subjects.ResultsStream), info(subjects.AuditStream), info(subjects.CallsStream)
		if res.MaxAge != 2*time.Hour {
			t.Errorf("config %d: results max age %v, want the operator's 2h", i, res.MaxAge)
		}
		if audit.MaxBytes != 1<<30 || audit.MaxMsgs != 1_000_000 {
			t.Errorf("config %d: audit max bytes %d, max msgs %d; want the operator's 1 GiB, 1000000", i, audit.MaxBytes, audit.MaxMsgs)
		}
		if calls.MaxMsgsPerSubject != 1000 {
			t.Errorf("config %d: calls max msgs per subject %d, want the operator's 1000", i, calls.MaxMsgsPerSubject)
		}
		wantResBytes, wantAuditAge := int64(-1), 7*24*time.Hour
		if streams != "" {
			wantResBytes, wantAuditAge = 1<<30, 720*time.Hour
		}
		if res.MaxBytes != wantResBytes || audit.MaxAge != wantAuditAge {
			t.Errorf("config %d: results max bytes %d, audit max age %v; want %d, %v", i, res.MaxBytes, audit.MaxAge, wantResBytes, wantAuditAge)
		}
		p.cancel()
		if err := <-p.done; err != nil {
			t.Errorf("executor %d: %v", i, err)
		}
		p.done <- nil
	}
}

// eventSeqs runs `events --json` with args against url and returns the sequences it printed.
func eventSeqs(t *testing.T, url string, args ...string) ([]uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, append([]string{"events", "--json", "--nats", url}, args...)...)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l eventLine
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("events line is not JSON: %v: %s", err, line)
		}
		seqs = append(seqs, l.Seq)
	}
	return seqs, nil
}

// TestEventsServerAndSubject: `events --server S --subject X` read the union of the server's
// events and X for every server (or failed at JetStream, the two filters overlapping); the
// --subject filters are narrowed to the server.
func TestEventsServerAndSubject(t *testing.T) {
	env := seedRegistry(t) // ticketing: 4 snapshot, 5 status, 6 changed, 7 snapshot, 13 confirmed
	tests := []struct {
		args []string
		want []uint64
		err  string
	}{
		{args: []string{"--subject", "registry.*.status"}, want: []uint64{5}},
		{args: []string{"--subject", "registry.*.status", "--subject", "registry.*.changed.*"}, want: []uint64{5, 6}},
		{args: []string{"--subject", "mcpstream.v1.registry.>"}, want: []uint64{4, 5, 6, 7, 13}},
		{args: []string{"--subject", "registry.ticketing.snapshot.tools"}, want: []uint64{4, 7}},
		{args: []string{"--subject", "registry.kb.>"}, err: `no event of server "ticketing"`},
	}
	for _, tt := range tests {
		got, err := eventSeqs(t, env.URL, append([]string{"--server", "ticketing"}, tt.args...)...)
		if tt.err != "" {
			if !errors.Is(err, ErrBadFilter) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("--server ticketing %v: %v, want an error saying %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("--server ticketing %v: events %v, %v; want %v", tt.args, got, err, tt.want)
		}
	}
}

// TestEventsRedundantSubjects: --subject filters of which one covers another (registry.> and
// registry.kb.status) failed at JetStream, whose consumers refuse overlapping filters; so did
// filters that overlap only in part (registry.*.status and registry.ticketing.>). Each event
// that any filter matches is printed, once.
func TestEventsRedundantSubjects(t *testing.T) {
	env := seedRegistry(t)
	tests := []struct {
		subjects []string
		want     []uint64
	}{
		{[]string{"registry.>", "registry.kb.status"}, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{[]string{"registry.kb.status", "registry.*.status", "registry.*.status"}, []uint64{1, 3, 5, 8, 10, 11, 12}},
		{[]string{"registry.*.status", "registry.ticketing.>"}, []uint64{1, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13}},
	}
	for _, tt := range tests {
		var args []string
		for _, s := range tt.subjects {
			args = append(args, "--subject", s)
		}
		got, err := eventSeqs(t, env.URL, args...)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("events %v: %v, %v; want %v", args, got, err, tt.want)
		}
	}
}

// startNATS starts a nats-server with opts on a free loopback port, for what natsembed does not
// set up (users with permissions, a server without JetStream); it stops at cleanup.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// TestCallNATSPermissionsFailFast: a NATS user that may not publish the call (or subscribe to
// its reply inbox) got an asynchronous permissions error from the server, which call ignored: it
// waited for an answer until --wait. It fails at once, saying what NATS refused.
func TestCallNATSPermissionsFailFast(t *testing.T) {
	all := &server.SubjectPermission{Allow: []string{">"}}
	ns := startNATS(t, &server.Options{Users: []*server.User{
		{Username: "executor", Password: "x", Permissions: &server.Permissions{Publish: all, Subscribe: all}},
		{Username: "nopub", Password: "x", Permissions: &server.Permissions{Subscribe: all,
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"mcpstream.v1.exec.>"}}}},
		{Username: "nosub", Password: "x", Permissions: &server.Permissions{Publish: all,
			Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"_INBOX.>"}}}},
	}})
	url := func(user string) string { return fmt.Sprintf("nats://%s:x@%s", user, ns.Addr()) }
	// A front end that answers every call at once, refused: only NATS stands in the way.
	nc, err := nats.Connect(url("executor"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe(subjects.ExecAll, func(m *nats.Msg) {
		m.Respond([]byte(`{"v":1,"id":"x","status":"refused","error":{"code":"forbidden","message":"reached the executor"}}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ user, denied string }{
		{"nopub", `Publish to "mcpstream.v1.exec.local"`},
		{"nosub", `Subscription to "_INBOX.`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, errOut, err := runCmd(t, ctx, "call", "kb__get_document", "--wait", "10s", "--nats", url(tt.user))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "permissions violation") || !strings.Contains(err.Error(), tt.denied) {
			t.Errorf("%s: call returned %v (stderr %q), want the permissions violation for %s", tt.user, err, errOut, tt.denied)
		}
		t.Logf("%s: %v", tt.user, err)
		if err != nil && strings.Contains(err.Error(), "x@") {
			t.Errorf("%s: the error shows the URL's password: %v", tt.user, err)
		}
	}
}

// TestNATSWithoutJetStream: a role process (or up --nats) against a NATS server without
// JetStream failed with "nats: jetstream not enabled" after the stream declarations, or at
// their timeout; it says which server lacks JetStream and what to do. So do the client commands
// that read streams.
func TestNATSWithoutJetStream(t *testing.T) {
	ns := startNATS(t, &server.Options{})
	url := ns.ClientURL()
	for _, args := range [][]string{
		{"executor", "--data", t.TempDir()},
		{"up", "--data", t.TempDir(), "--http-listen", ""},
		{"events"},
		{"servers"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, errOut, err := runCmd(t, ctx, append(args, "--nats", url)...)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "JetStream is not enabled on "+url) {
			t.Errorf("%s: %v (stderr %q), want JetStream is not enabled on %s", args[0], err, lastLines(errOut, 3), url)
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
