package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Every executor, with or without a front end, answers $SRV.INFO.mcpstream-executor with the
// digest of the policy it enforces: before, executors ran no discovery service at all, so
// nothing could tell which policy each one had loaded. Each also advertises the digest of its
// limits, approval patterns and timeouts (Config.EnforcementDigest), which executors compare.
func TestServiceAdvertisesPolicyDigest(t *testing.T) {
	env := natstest.Start(t)
	pol, err := policy.New(&policy.Config{Rules: []policy.Rule{{Name: "kb only", Allow: []string{"kb__*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	start := func(cfg Config) {
		t.Helper()
		cfg.MemoryState = true
		ex, err := New(env.Connect(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ex.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(waitLimit):
				t.Errorf("executor %s did not stop", cfg.Name)
			}
		})
		waitFor(t, cfg.Name+" ready", ex.Ready)
	}
	limited := Config{Limits: Limits{Tenant: Rate{Concurrency: 3}}, Approve: []string{"kb__delete*"}}
	start(Config{Name: "front", Policy: pol, Workers: 1, Limits: limited.Limits, Approve: limited.Approve})
	start(Config{Name: "workers-only", FrontEnd: new(bool), Workers: 1}) // open policy

	nc := env.Connect(t)
	sub, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(subjects.SRVInfo(subjects.ExecutorService), sub.Subject, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for len(got) < 2 {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%d executors answered $SRV.INFO, want 2: %v", len(got), err)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatalf("info: %v: %s", err, msg.Data)
		}
		got[info.Metadata[subjects.MetaInstance]] = info.Metadata
	}
	for name, want := range map[string]map[string]string{
		"front": {subjects.MetaRole: subjects.RoleExecutor, subjects.MetaPolicyDigest: pol.Digest(), "frontEnd": "true", "workers": "true",
			subjects.MetaEnforcementDigest: limited.EnforcementDigest()},
		"workers-only": {subjects.MetaRole: subjects.RoleExecutor, subjects.MetaPolicyDigest: policy.Open().Digest(), "frontEnd": "false", "workers": "true",
			subjects.MetaEnforcementDigest: Config{}.EnforcementDigest()},
	} {
		for k, v := range want {
			if got[name][k] != v {
				t.Errorf("executor %s: metadata %s = %q, want %q (all: %v)", name, k, got[name][k], v, got[name])
			}
		}
	}
}
