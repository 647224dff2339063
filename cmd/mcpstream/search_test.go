package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// catalogEnv starts NATS, publishes the real demo servers' tools (listed through their own
// tools/list handler) and runs one indexer replica serving the catalog; it returns the NATS URL.
func catalogEnv(t *testing.T, pol *policy.Policy) string {
	t.Helper()
	env := natstest.Start(t)
	ctx := context.Background()
	var last uint64
	for _, name := range []string{"kb", "logging", "ticketing"} {
		srv, err := demoservers.New(name, demoservers.Options{Logs: 10})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(srv.HandleMessage(ctx, json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)))
		var res struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &res); err != nil || len(res.Result.Tools) == 0 {
			t.Fatalf("tools/list of %s: %v %s", name, err, b)
		}
		at := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
		for _, m := range []struct {
			subject string
			v       any
		}{
			{subjects.RegistryStatus(name), subjects.Status{V: 1, Type: subjects.EventStatus, Server: name, Status: subjects.StatusReady, At: at}},
			{subjects.RegistrySnapshot(name, subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: name,
				Kind: subjects.KindTools, Fingerprint: name, ListedAt: at, Pages: 1, Items: res.Result.Tools,
				Info: &subjects.ServerInfo{Description: demoDescriptions[name], Transport: "stdio"}}},
		} {
			data, _ := json.Marshal(m.v)
			ack, err := env.JS.Publish(ctx, m.subject, data)
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
	}
	cat, err := indexer.Open(indexer.Config{Dir: filepath.Join(t.TempDir(), "catalog"), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 2)
	go func() { errc <- cat.Follow(rctx, env.JS) }()
	go func() { errc <- cat.Serve(rctx, env.NC) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
	})
	cl := indexer.Client{NC: env.NC, Timeout: time.Second}
	for i := 0; ; i++ {
		if cat.Seq() >= last {
			if _, err := cl.Servers(ctx, "local", subjects.ServersRequest{}); err == nil {
				break
			}
		}
		if i == 1000 {
			t.Fatal("catalog not serving after 1000 polls")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return env.URL
}

// catRun runs one mcpstream command in-process.
func catRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

func TestSearchCommand(t *testing.T) {
	url := catalogEnv(t, nil)

	t.Run("json", func(t *testing.T) {
		out, errOut, err := catRun(t, "search", "file a new ticket in the tracker", "--json", "--nats", url)
		if err != nil {
			t.Fatalf("search: %v\n%s", err, errOut)
		}
		var results []map[string]any
		if err := json.Unmarshal([]byte(out), &results); err != nil {
			t.Fatalf("not a JSON array: %v\n%s", err, out)
		}
		if len(results) == 0 || results[0]["name"] != "ticketing__createIssue" {
			t.Fatalf("results %v", out)
		}
		for _, r := range results {
			for _, key := range []string{"name", "server", "description", "score"} {
				if _, ok := r[key]; !ok {
					t.Errorf("result %v lacks %q", r["name"], key)
				}
			}
			if !subjects.ValidPublicName(r["name"].(string)) {
				t.Errorf("invalid name %v", r["name"])
			}
		}
	})
	t.Run("text", func(t *testing.T) {
		out, _, err := catRun(t, "search", "knowledge", "base", "refund", "--k", "1", "--nats", url)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "1. kb__search_knowledge_base  (server kb, tool search_knowledge_base)") || strings.Contains(out, "2. ") {
			t.Errorf("text output:\n%s", out)
		}
	})
	t.Run("full", func(t *testing.T) {
		out, _, err := catRun(t, "search", "select:ticketing__closeIssue", "--detail", "full", "--nats", url)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"[destructive, idempotent, needs-approval]", "input schema:", "output schema:", "state: fresh"} {
			if !strings.Contains(out, want) {
				t.Errorf("full output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("names", func(t *testing.T) {
		out, _, err := catRun(t, "search", "logs", "--detail", "name", "--nats", url)
		if err != nil || out != "logging__getLogs\nlogging__getLogStats\n" {
			t.Errorf("names: %v %q", err, out)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		out, _, err := catRun(t, "search", "zebra quantum xylophone", "--nats", url)
		if err != nil || out != "no tool matches\n" {
			t.Errorf("no match: %v %q", err, out)
		}
		out, _, err = catRun(t, "search", "zebra quantum xylophone", "--json", "--nats", url)
		if err != nil || strings.TrimSpace(out) != "[]" {
			t.Errorf("no match json: %v %q", err, out)
		}
	})
	t.Run("bad k", func(t *testing.T) {
		// Outside the catalog's 1..100 (0: the default): a usage error, exit status 2, not sent
		// (the catalog would refuse it bad_request).
		for _, args := range [][]string{{"--json"}, nil} {
			out, errOut, err := catRun(t, append([]string{"search", "logs", "--k", "500", "--nats", url}, args...)...)
			var code exitCode
			if !errors.As(err, &code) || code != 2 || out != "" || !strings.Contains(errOut, "--k 500: want 1..100") {
				t.Errorf("k=500 %v: %v, stdout %q, stderr %q", args, err, out, lastLines(errOut, 3))
			}
		}
	})
	t.Run("usage", func(t *testing.T) {
		_, errOut, err := catRun(t, "search", "--nats", url)
		var code exitCode
		if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, "Usage: mcpstream search QUERY") {
			t.Errorf("no query: %v %q", err, errOut)
		}
	})
}

func TestSearchPrincipal(t *testing.T) {
	pol, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Tenant: "acme"}},
		Rules:      []policy.Rule{{Users: []string{"alice"}, Allow: []string{"kb__*"}}, {Roles: []string{"oncall"}, Allow: []string{"logging__*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	url := catalogEnv(t, pol)
	tests := []struct {
		principal string
		want      string // first result of "logs knowledge base", "" = error
	}{
		{"acme/alice", "kb__search_knowledge_base"},
		{"alice", ""}, // alice belongs to acme: the request on the local tenant's subject is refused
		{"mallory", ""},
		{"a/b/c", ""},
	}
	for _, tt := range tests {
		out, _, err := catRun(t, "search", "logs knowledge base", "--json", "--principal", tt.principal, "--nats", url)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: no error: %s", tt.principal, out)
			}
			continue
		}
		var results []subjects.ToolInfo
		if err != nil || json.Unmarshal([]byte(out), &results) != nil || len(results) == 0 || results[0].Name != tt.want {
			t.Errorf("%s: %v %s", tt.principal, err, out)
		}
		for _, r := range results {
			if r.Server != "kb" {
				t.Errorf("%s sees %s", tt.principal, r.Name)
			}
		}
	}
	// Roles after a colon: the policy lists principals, so their roles come from it, not the flag.
	out, _, err := catRun(t, "search", "select:logging__getLogs", "--json", "--principal", "acme/alice:oncall", "--nats", url)
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("roles claimed by the client were trusted: %v %s", err, out)
	}
}

func TestInspectCommand(t *testing.T) {
	url := catalogEnv(t, nil)
	out, _, err := catRun(t, "inspect", "ticketing__createIssue", "--json", "--nats", url)
	if err != nil {
		t.Fatal(err)
	}
	var ti subjects.ToolInfo
	if err := json.Unmarshal([]byte(out), &ti); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	if ti.Server != "ticketing" || ti.Tool != "createIssue" || ti.InputSchema == nil || ti.State != subjects.StateFresh || ti.Definition == nil {
		t.Errorf("inspect: %+v", ti)
	}
	out, _, err = catRun(t, "inspect", "ticketing__createIssue", "--nats", url)
	if err != nil || !strings.Contains(out, "description:\n     Open a new ticket") || !strings.Contains(out, `"priority"`) {
		t.Errorf("text: %v\n%s", err, out)
	}
	out, _, err = catRun(t, "inspect", "kb__nothing", "--json", "--nats", url)
	var code exitCode
	if !errors.As(err, &code) || code != 1 || !strings.Contains(out, `"code": "not_found"`) {
		t.Errorf("not found: %v %s", err, out)
	}
	if _, _, err := catRun(t, "inspect", "kb__nothing", "--nats", url); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("not found text: %v", err)
	}
}

func TestCatalogNotRunning(t *testing.T) {
	env := natstest.Start(t)
	_, _, err := catRun(t, "search", "logs", "--nats", env.URL)
	if !errors.Is(err, indexer.ErrNoCatalog) {
		t.Errorf("err %v, want ErrNoCatalog", err)
	}
}

// The full detail level shows a tool's state once: the summary line of a tool that is not fresh
// already says it, with its reason.
func TestPrintToolStateOnce(t *testing.T) {
	for _, st := range []string{subjects.StateFresh, "stale"} {
		var b strings.Builder
		tool := subjects.ToolInfo{Name: "a__b", State: st, StateReason: "list_changed", CacheScope: "shared", ListedAt: "2026-12-01T00:00:00Z"}
		printToolHead(&b, 1, tool)
		printToolFull(&b, tool)
		if n := strings.Count(b.String(), "state:"); n != 1 {
			t.Errorf("%s: state shown %d times:\n%s", st, n, b.String())
		}
		if !strings.Contains(b.String(), "cache scope shared") {
			t.Errorf("%s: no cache scope:\n%s", st, b.String())
		}
	}
}
