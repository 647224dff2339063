package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runIndexerRole runs `mcpstream indexer` as a separate process (this test binary acting as
// mcpstream, see TestMain) until the returned stop sends it SIGTERM (or sig) and waits for it.
func runIndexerRole(t *testing.T, url, data, replica string, sig ...os.Signal) (stop func() error, log *lockedBuffer) {
	t.Helper()
	log = &lockedBuffer{}
	cmd := exec.Command(os.Args[0], "indexer", "--nats", url, "--data", data, "--replica", replica, "--log-format", "json")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stdout, cmd.Stderr = io.Discard, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cmd.Process.Signal(append(sig, syscall.SIGTERM)[0])
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				err = fmt.Errorf("replica %s did not stop within 30s after SIGTERM", replica)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop, log
}

func publishDemoTools(t *testing.T, env *natstest.Env, server string, tools ...string) {
	t.Helper()
	var items []json.RawMessage
	for _, n := range tools {
		items = append(items, json.RawMessage(`{"name":"`+n+`","description":"`+strings.ReplaceAll(n, "_", " ")+` for the role test","inputSchema":{"type":"object"}}`))
	}
	at := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for _, m := range []struct {
		subject string
		v       any
	}{
		{subjects.RegistryStatus(server), subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady, At: at}},
		{subjects.RegistrySnapshot(server, subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: server,
			Kind: subjects.KindTools, Fingerprint: strings.Join(tools, ","), ListedAt: at, Pages: 1, Items: items}},
	} {
		data, _ := json.Marshal(m.v)
		if _, err := env.JS.Publish(context.Background(), m.subject, data); err != nil {
			t.Fatal(err)
		}
	}
}

// searchNames runs `search QUERY --json --detail name` and returns the names ("" on error).
func searchNames(t *testing.T, url, query string) string {
	t.Helper()
	out, _, err := catRun(t, "search", query, "--json", "--detail", "name", "--nats", url)
	if err != nil {
		return ""
	}
	var res []subjects.ToolInfo
	json.Unmarshal([]byte(out), &res)
	var names []string
	for _, r := range res {
		names = append(names, r.Name)
	}
	return strings.Join(names, ",")
}

func waitSearch(t *testing.T, url, query, want string) {
	t.Helper()
	var got string
	for range 400 {
		if got = searchNames(t, url, query); got == want {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("search %q: got %q, want %q", query, got, want)
}

// TestIndexerRole: `mcpstream indexer` follows the stream into DATA/indexer/REPLICA and serves
// search; two replicas share the queue group; a restarted replica resumes from its directory and
// a removed directory is rebuilt by replay.
func TestIndexerRole(t *testing.T) {
	env := natstest.Start(t)
	data := t.TempDir()
	publishDemoTools(t, env, "weather", "get_forecast", "get_alerts")

	stop1, log1 := runIndexerRole(t, env.URL, data, "1")
	stop2, log2 := runIndexerRole(t, env.URL, data, "2")
	// Both replicas caught up (each applied the weather events into its own directory).
	waitLogSeq(t, log1, "catalog caught up with the registry stream")
	waitLogSeq(t, log2, "catalog caught up with the registry stream")
	waitSearch(t, env.URL, "forecast", "weather__get_forecast")
	for _, r := range []string{"1", "2"} {
		if _, err := os.Stat(filepath.Join(data, "indexer", r, "MANIFEST")); err != nil {
			t.Errorf("replica %s has no Badger directory: %v", r, err)
		}
	}
	publishDemoTools(t, env, "github", "create_issue")
	waitSearch(t, env.URL, "create issue", "github__create_issue")

	// Stop replica 1 while 2 serves; new events arrive; 1 resumes from its sequence.
	if err := stop1(); err != nil {
		t.Fatalf("replica 1 stopped with %v\n%s", err, log1.String())
	}
	publishDemoTools(t, env, "github", "create_issue", "merge_pull_request")
	waitSearch(t, env.URL, "merge pull request", "github__merge_pull_request")
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	_, log1b := runIndexerRole(t, env.URL, data, "1")
	// It opened its directory at the sequence it had applied (not 0: no rebuild), then caught
	// up with what arrived while it was down.
	if seq := waitLogSeq(t, log1b, "catalog opened"); seq < 2 {
		t.Errorf("replica 1 reopened at sequence %d, want the one it had stored (>= 2)\n%s", seq, log1b.String())
	}
	waitSearch(t, env.URL, "merge pull request", "github__merge_pull_request")

	// A removed directory is rebuilt by replay.
	if err := os.RemoveAll(filepath.Join(data, "indexer", "2")); err != nil {
		t.Fatal(err)
	}
	stop2b, _ := runIndexerRole(t, env.URL, data, "2")
	defer stop2b()
	waitSearch(t, env.URL, "forecast", "weather__get_forecast")

	// Bad replica names are refused.
	_, _, err := catRun(t, "indexer", "--nats", env.URL, "--data", data, "--replica", "../x")
	if err == nil || !strings.Contains(err.Error(), "--replica") {
		t.Errorf("--replica ../x: %v", err)
	}
}

// waitLogSeq waits (bounded) for a JSON log line with message msg in a child's log and returns
// its "seq" field. The child's stderr reaches the buffer through a copying goroutine.
func waitLogSeq(t *testing.T, log *lockedBuffer, msg string) uint64 {
	t.Helper()
	for range 800 {
		for _, line := range strings.Split(log.String(), "\n") {
			var l struct {
				Message string `json:"message"`
				Seq     uint64 `json:"seq"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == msg {
				return l.Seq
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("no %q line in the child's log:\n%s", msg, log.String())
	return 0
}

// SIGHUP (the terminal that ran it closed) stops a role cleanly, as SIGTERM does: before, the
// process died at once, without stopping its roles or draining NATS.
func TestRoleStopsCleanlyOnSIGHUP(t *testing.T) {
	env := natstest.Start(t)
	publishDemoTools(t, env, "weather", "get_forecast")
	stop, log := runIndexerRole(t, env.URL, t.TempDir(), "1", syscall.SIGHUP)
	waitLogSeq(t, log, "catalog caught up with the registry stream")
	if err := stop(); err != nil {
		t.Fatalf("after SIGHUP: %v\n%s", err, log.String())
	}
}
