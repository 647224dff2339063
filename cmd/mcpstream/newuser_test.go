package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestUpDispatchesToOtherConnectors: under `up`, a server that another registrysync process
// serves (scale-out of the connectors: "exactly one per set of servers") is in the catalog and
// `servers`, but the executor of `up` dispatched only to its in-process connectors and refused
// the call with not_found "no server remote is configured". It must reach the other connector
// over NATS (mcpstream.v1.dispatch.<server>), as an executor process does.
func TestUpDispatchesToOtherConnectors(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUp(t, "--config", cfgPath)
	waitFor(t, "up healthy", 600, func() bool { code, _ := p.healthz(t); return code == 200 })

	nc, err := nats.Connect(p.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The other registrysync: its registry events, and its dispatch endpoint.
	sub, err := nc.Subscribe(subjects.Dispatch("remote"), func(m *nats.Msg) {
		data, _ := json.Marshal(subjects.DispatchReply{V: subjects.Version,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"hello from the other connector"}]}`)})
		m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil { // subscribed before a call is dispatched
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	now := time.Now().UTC()
	for _, m := range []struct {
		subject string
		v       any
	}{
		{subjects.RegistryStatus("remote"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "remote", Status: subjects.StatusReady, At: now}},
		{subjects.RegistrySnapshot("remote", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "remote",
			Kind: subjects.KindTools, Fingerprint: "remote-1", ListedAt: now, Pages: 1,
			Items: []json.RawMessage{json.RawMessage(`{"name":"hello","description":"say hello","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}}},
	} {
		data, _ := json.Marshal(m.v)
		if _, err := js.Publish(ctx, m.subject, data); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut string
	waitFor(t, "remote__hello answered", 200, func() bool {
		out, errOut, err = runCmd(t, ctx, "call", "remote__hello", "{}", "--nats", p.nats)
		return err == nil || !strings.Contains(errOut, "not_found: no tool") // the executor has not seen it yet
	})
	if err != nil || !strings.Contains(out, "hello from the other connector") {
		t.Errorf("call remote__hello: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
}

// TestIndexerNeedsNoServerSecrets: the indexer reads --config for its policy (and search)
// sections — "only registrysync resolves the ${ENV_VAR} secrets it uses" says
// deploy/mcpstream.yaml — yet it refused to start without the servers' secrets in its
// environment. The executor, which redacts them from audit events, still needs them.
func TestIndexerNeedsNoServerSecrets(t *testing.T) {
	env := natstest.Start(t).URL
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mcpstream.yaml")
	const unset = "MCPSTREAM_TEST_UNSET_SECRET_7f3a"
	os.Unsetenv(unset)
	yml := "servers:\n  - name: gh\n    url: https://example.com/mcp\n    headers:\n      Authorization: Bearer ${" + unset + "}\n" +
		"  - name: crm\n    url: ${" + unset + "}\n"
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"indexer", "--nats", env, "--config", cfgPath, "--data", dir, "--http-listen", ""}, &out, &errOut)
	}()
	started := false
	for range 600 {
		if strings.Contains(out.String(), "mcpstream indexer: NATS") {
			started = true
			break
		}
		select {
		case err := <-done:
			done <- err
		default:
		}
		if len(done) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	err := <-done
	if !started {
		t.Fatalf("indexer did not start: %v\n%s", err, errOut.String())
	}
	if err != nil {
		t.Errorf("indexer: %v", err)
	}

	// The executor still refuses, naming the variable.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	_, _, err = runCmd(t, ctx2, "executor", "--nats", env, "--config", cfgPath, "--data", dir, "--http-listen", "")
	if err == nil || !strings.Contains(err.Error(), unset) {
		t.Errorf("executor without the secret: %v, want an error naming %s", err, unset)
	}
}

// TestEvalRetrievalSwappedFiles: --tools and --queries swapped (or any file of the wrong kind)
// loaded 50 "tools" with no server or name, sent every tool line as an empty query, and printed
// all-zero metrics with exit status 0.
func TestEvalRetrievalSwappedFiles(t *testing.T) {
	_, _, err := catRun(t, "eval", "retrieval", "--tools", "testdata/eval_queries.jsonl", "--queries", "testdata/eval_tools.jsonl")
	if err == nil || !strings.Contains(err.Error(), "eval_queries.jsonl:1") {
		t.Errorf("swapped files: %v, want an error at eval_queries.jsonl:1", err)
	}
	dir := t.TempDir()
	noQuery := filepath.Join(dir, "q.jsonl")
	os.WriteFile(noQuery, []byte(`{"id":"q1","gold_tools":["a::b"]}`+"\n"), 0o644)
	_, _, err = catRun(t, "eval", "retrieval", "--tools", "testdata/eval_tools.jsonl", "--queries", noQuery)
	if err == nil || !strings.Contains(err.Error(), "q.jsonl:1") || !strings.Contains(err.Error(), "query") {
		t.Errorf("query line without a query: %v, want an error naming q.jsonl:1 and query", err)
	}
}

// TestCatalogFailureReasonOnce: `inspect` of a removed tool printed "not_found: no tool named
// ticketing__listIssues (removed) (removed)".
func TestCatalogFailureReasonOnce(t *testing.T) {
	err := catalogFailure(nil, false, &subjects.Error{Code: subjects.CodeNotFound,
		Message: "no tool named ticketing__listIssues (removed)", Reason: "removed"})
	if err == nil || strings.Count(err.Error(), "(removed)") != 1 {
		t.Errorf("got %v, want the reason once", err)
	}
	err = catalogFailure(nil, false, &subjects.Error{Code: subjects.CodeUnavailable, Message: "replica rebuilding", Reason: "rebuilding"})
	if err == nil || !strings.HasSuffix(err.Error(), "(rebuilding)") {
		t.Errorf("got %v, want the reason added", err)
	}
}

// TestMissingArgumentSaysWhat: a missing or extra positional argument printed only the usage,
// without saying what was wrong (unlike a bad flag, which names itself).
func TestMissingArgumentSaysWhat(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect"}, "mcpstream inspect: want one tool NAME"},
		{[]string{"inspect", "a", "b"}, "got 2 arguments: a b"},
		{[]string{"search"}, "mcpstream search: want a QUERY"},
		{[]string{"call"}, "mcpstream call: want a tool NAME"},
		{[]string{"approve"}, "mcpstream approve: want one call ID"},
		{[]string{"deny", "a", "b"}, "mcpstream deny: want one call ID"},
		{[]string{"eval", "retrieval"}, "--tools and --queries are required"},
		{[]string{"eval", "nope"}, `unknown evaluation "nope"`},
	} {
		_, errOut, err := catRun(t, tc.args...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %v, stderr %q; want exit status 2 and %q", tc.args, err, firstLine(errOut), tc.want)
		}
	}
	if out, _, _ := catRun(t, "deny", "--help"); !strings.Contains(out, "\nDenies one call") {
		t.Errorf("deny --help: %q, want \"Denies one call\"", firstLine(strings.TrimSpace(out)))
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// TestCallSaysWhileWaiting: a call of a destructive tool waits (up to 5 minutes) for approval,
// and `call` waited in silence, without even naming the random call id the approver needs.
func TestCallSaysWhileWaiting(t *testing.T) {
	env := natstest.Start(t)
	if _, err := env.NC.Subscribe(subjects.ExecAll, func(*nats.Msg) {}); err != nil { // never answers
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil { // subscribed before the call asks
		t.Fatal(err)
	}
	defer func(d time.Duration) { callWaitingHint = d }(callWaitingHint)
	callWaitingHint = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, errOut, _ := runCmd(t, ctx, "call", "kb__x", "--wait", "1s", "--principal", "acme/bob", "--nats", env.URL)
	if !strings.Contains(errOut, "mcpstream approve c-") || !strings.Contains(errOut, "--tenant acme") {
		t.Errorf("stderr %q: want a note naming the call id and the approve command", errOut)
	}
}

// TestNegativeStreamReplicas: --stream-replicas -1 was taken as 1, and set every existing
// stream to one replica (on a cluster, a scale-down nobody asked for).
func TestNegativeStreamReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "up", "--stream-replicas", "-1", "--data", t.TempDir(), "--nats-listen", "none", "--http-listen", "")
	if err == nil || !strings.Contains(err.Error(), "--stream-replicas") {
		t.Errorf("up --stream-replicas -1: %v, want an error naming the flag", err)
	}
}

// TestEventsUnknownSubjectFamily: `events --subject foo.>` said "foo subjects are request/reply,
// not stored", as if mcpstream had such subjects.
func TestEventsUnknownSubjectFamily(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "events", "--subject", "foo.>", "--nats", "nats://127.0.0.1:1")
	if err == nil || strings.Contains(err.Error(), "request/reply") || !strings.Contains(err.Error(), "no mcpstream subjects") {
		t.Errorf("events --subject foo.>: %v, want \"no mcpstream subjects start with ...\"", err)
	}
}

// TestHelpUnknownCommand: help for a command that does not exist says so and fails (it printed
// the general help and succeeded).
func TestHelpUnknownCommand(t *testing.T) {
	var stdout, stderr syncBuffer
	err := run(context.Background(), []string{"help", "nosuch"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown command "nosuch"`) {
		t.Errorf("help nosuch: %v", err)
	}
}

// TestUpBadConfigCreatesNothing: a configuration that does not load is refused before the data
// directory is created.
func TestUpBadConfigCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(cfg, []byte("servers: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	var stdout, stderr syncBuffer
	if err := run(context.Background(), []string{"up", "--config", cfg, "--data", data, "--nats-listen", "none", "--http-listen", ""}, &stdout, &stderr); err == nil {
		t.Fatal("a bad configuration was accepted")
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data directory was created (%v)", err)
	}
}

// TestConnectErrorHintOnlyWhenNoServer: a NATS connection that fails for another reason than
// "no server there" (here a missing credentials file, against a running server) said "is
// `mcpstream up` running? set --nats or $MCPSTREAM_NATS", sending the user after the wrong fix.
func TestConnectErrorHintOnlyWhenNoServer(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creds := filepath.Join(t.TempDir(), "missing.creds")
	_, _, err := runCmd(t, ctx, "servers", "--nats", env.URL, "--nats-creds", creds)
	if err == nil || !strings.Contains(err.Error(), "missing.creds") || strings.Contains(err.Error(), "mcpstream up` running") {
		t.Errorf("servers with a missing credentials file: %v, want the file named and no \"is mcpstream up running\" hint", err)
	}
	_, _, err = runCmd(t, ctx, "servers", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "mcpstream up` running") {
		t.Errorf("servers against nothing: %v, want the hint", err)
	}
}

// TestEventsServerWithOtherStream: `events --server kb --stream audit` answered `--subject
// "mcpstream.v1.registry.kb.>" is not in stream MCPSTREAM_AUDIT`, a flag the user never gave.
func TestEventsServerWithOtherStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, args := range [][]string{{"--stream", "audit"}, {"--subject", "results.>"}} {
		_, _, err := runCmd(t, ctx, append([]string{"events", "--server", "kb", "--nats", "nats://127.0.0.1:1"}, args...)...)
		if !errors.Is(err, ErrBadFilter) || !strings.Contains(err.Error(), "--server") || strings.Contains(err.Error(), "registry.kb") {
			t.Errorf("events --server kb %v: %v, want an error about --server", args, err)
		}
	}
}

// TestRegistrySyncHasNoReplicaFlag: registrysync accepted --replica and ignored it (the README
// gives it to indexer and executor only; connectors are not replicated: one process per set of
// servers).
func TestRegistrySyncHasNoReplicaFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, errOut, err := runCmd(t, ctx, "registrysync", "--replica", "1", "--nats", "nats://127.0.0.1:1")
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errOut, "flag provided but not defined: -replica") {
		t.Errorf("registrysync --replica: %v, %q; want exit status 2, flag not defined", err, errOut)
	}
	for _, cmd := range []string{"indexer", "executor"} {
		out, _, err := runCmd(t, ctx, cmd, "--help")
		if err != nil || !strings.Contains(out, "-replica") {
			t.Errorf("%s --help: %v; want --replica listed", cmd, err)
		}
	}
}
