package indexer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Every replica answers $SRV.INFO.mcpstream-catalog with the digest of the policy it enforces,
// its role and its instance, so that a replica that loaded another policy than the executors can
// be found (it used to advertise only its replica name and endpoints).
func TestServiceAdvertisesPolicyDigest(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	pol, err := policy.New(&policy.Config{Rules: []policy.Rule{{Name: "kb only", Allow: []string{"kb__*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := startReplicaConfig(t, env, Config{Policy: pol, Replica: "a", Instance: "host-a:1/a"}, env.Connect(t))
	r2 := startReplicaConfig(t, env, Config{Replica: "b"}, env.Connect(t)) // open policy, default instance
	waitSeq(t, r1.Catalog, seq)
	waitSeq(t, r2.Catalog, seq)

	nc := env.Connect(t)
	sub, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]subjects.PolicyInfo{}
	// A replica joins once Serve sees it ready (its own goroutine, polling): until then the
	// request has no responders, answered at once (NextMsg's ErrNoResponders), so the
	// replicas are asked again until both answered, for as long as waitFor allows — a fixed
	// number of asking rounds ran out in a quarter second on a loaded machine.
	waitFor(t, "both replicas' $SRV.INFO", func() bool {
		if err := nc.PublishRequest(subjects.SRVInfo(subjects.CatalogService), sub.Subject, nil); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := sub.NextMsg(50 * time.Millisecond)
			if err != nil {
				break
			}
			var info micro.Info
			if err := json.Unmarshal(msg.Data, &info); err != nil {
				t.Fatalf("info: %v: %s", err, msg.Data)
			}
			got[info.Metadata["replica"]] = subjects.PolicyInfoOf(info.Metadata)
		}
		return len(got) == 2
	})
	if want := (subjects.PolicyInfo{Role: subjects.RoleIndexer, Instance: "host-a:1/a", PolicyDigest: pol.Digest()}); got["a"] != want {
		t.Errorf("replica a advertises %+v, want %+v", got["a"], want)
	}
	b := got["b"]
	if b.Role != subjects.RoleIndexer || b.PolicyDigest != policy.Open().Digest() || b.Instance == "" {
		t.Errorf("replica b advertises %+v, want role indexer, the open policy's digest %s and an instance", b, policy.Open().Digest())
	}
}
