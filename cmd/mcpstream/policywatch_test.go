package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestPolicyWatchHostileAndLeakFree runs a role's policy check often (every check back to
// back) against a hostile $SRV.INFO answerer that gives a new set of instances with other
// digests on every request, more than a check reads: every check ends (bounded by its wait or
// its answer cap), the log says at most one line per check, and the checks leave no
// subscription or goroutine behind.
func TestPolicyWatchHostileAndLeakFree(t *testing.T) {
	old := policyCheckEvery
	policyCheckEvery = time.Millisecond
	t.Cleanup(func() { policyCheckEvery = old })
	env := natstest.Start(t)

	hostile := env.Connect(t)
	var requests atomic.Int64
	other := policy.Open().Digest()
	other = other[:len(other)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(other, "0")]
	if _, err := hostile.Subscribe(subjects.SRVInfo(subjects.CatalogService), func(m *nats.Msg) {
		n := requests.Add(1)
		for i := range maxPolicyReplies + 100 {
			b, _ := json.Marshal(map[string]any{"type": "io.nats.micro.v1.info_response", "name": subjects.CatalogService,
				"id": fmt.Sprintf("fake-%d-%d", n, i), "metadata": map[string]string{
					subjects.MetaRole: subjects.RoleIndexer, subjects.MetaInstance: fmt.Sprintf("liar-%d-%d", n, i), subjects.MetaPolicyDigest: other}})
			if hostile.Publish(m.Reply, b) != nil {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := hostile.Flush(); err != nil {
		t.Fatal(err)
	}

	nc := env.Connect(t)
	logs := &syncBuffer{}
	w := &policyWatch{nc: nc, log: zerolog.New(logs), role: subjects.RoleExecutor, instance: "me:1", digest: policy.Open().Digest()}
	subsBefore := nc.NumSubscriptions()
	goBefore := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	// Each check asks twice (catalog and executor services): wait for a few checks.
	deadline := time.Now().Add(30 * time.Second)
	for requests.Load() < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the policy watch did not stop")
	}
	checks := requests.Load()
	if checks < 3 {
		t.Fatalf("only %d checks ran", checks)
	}
	// Seen by some check (the log's warning), not necessarily the last: on a loaded machine a
	// check's second of collecting can end before the liar's answers come, and that check sees
	// nobody (then logs that the others agree again, the gauge 0).
	if !strings.Contains(logs.String(), "MISMATCH") {
		t.Errorf("the liars' digests were not seen as a mismatch by any check:\n%.2000s", logs.String())
	}
	lines := strings.Count(logs.String(), "\n")
	if int64(lines) > checks {
		t.Errorf("%d log lines for %d checks:\n%.2000s", lines, checks, logs.String())
	}
	if n := nc.NumSubscriptions(); n != subsBefore {
		t.Errorf("%d subscriptions after %d checks, %d before", n, checks, subsBefore)
	}
	// Goroutines wind down asynchronously (the timer's, the connection's): allow a moment.
	var goAfter int
	for range 200 {
		if goAfter = runtime.NumGoroutine(); goAfter <= goBefore {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if goAfter > goBefore {
		t.Errorf("%d goroutines after %d checks, %d before", goAfter, checks, goBefore)
	}
	t.Logf("%d checks, %d log lines, %d subscriptions, %d goroutines (before: %d, %d)", checks, lines, nc.NumSubscriptions(), goAfter, subsBefore, goBefore)
}

// TestPolicyCheckSeesInstancesPastAFlood: a flood of answers larger than a check reads
// (maxPolicyReplies) overflows the inbox's pending limits, and the next read returned
// ErrSlowConsumer, which ended the check as if its wait were over: the answers still queued
// were not read, and the report did not say it stopped short (truncated), so "no instance
// answered" (exit 3) or an incomplete "ok" looked like a full view. A check reads what was
// queued, up to its cap, and says it was truncated.
func TestPolicyCheckSeesInstancesPastAFlood(t *testing.T) {
	env := natstest.Start(t)
	genuine := env.Connect(t)
	svc, err := micro.AddService(genuine, micro.Config{Name: subjects.CatalogService, Version: "1.0.0",
		Metadata: subjects.PolicyInfo{Role: subjects.RoleIndexer, Instance: "real:1/0", PolicyDigest: policy.Open().Digest()}.Metadata()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	if err := genuine.Flush(); err != nil { // its subscriptions reached the server
		t.Fatal(err)
	}
	hostile := env.Connect(t)
	// The liar answers once the real instance has (a NATS request goes to subscribers in
	// no set order): a burst of twice what a check reads.
	if _, err := hostile.Subscribe(subjects.SRVInfo(subjects.CatalogService), func(m *nats.Msg) {
		time.Sleep(50 * time.Millisecond)
		b, _ := json.Marshal(map[string]any{"name": subjects.CatalogService, "id": "liar", "metadata": map[string]string{}})
		for range 2 * maxPolicyReplies {
			if hostile.Publish(m.Reply, b) != nil {
				return
			}
		}
		hostile.Flush()
	}); err != nil {
		t.Fatal(err)
	}
	if err := hostile.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := env.Connect(t)
	nc.SetErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}) // the flood's slow consumer, expected
	for round := range 3 {
		insts, bad, truncated, err := collectPolicyInstances(context.Background(), nc, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var real bool
		for _, in := range insts {
			real = real || in.Instance == "real:1/0"
		}
		if !real || !truncated {
			t.Fatalf("round %d: real instance seen %v, truncated %v (%d instances, %d bad); want it seen, and the flood said", round, real, truncated, len(insts), bad)
		}
	}
}
