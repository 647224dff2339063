package executor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSlotLeaseOfExistingBucket: the slots bucket kept the TTL it was created with (an executor
// with a shorter SlotLease declared it first, or this one before its SlotLease was raised), and
// an executor renewed its slots every min(AckWait, its own SlotLease)/3: every 10 s by default,
// against a bucket TTL of 1 s. A running call's slot expired after 1 s and the concurrency cap
// let a second call run beside it. The slots are renewed within the bucket's TTL; a bucket
// without per-key TTLs is given them, and its TTL raised (see ensureSlots).
func TestSlotLeaseOfExistingBucket(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// declared by another executor, as an older mcpstream did (no per-key TTLs)
	kv, err := r.env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1, TTL: time.Second, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	r.startExecutor(r.managerConfig(Config{Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 1}}}}), r.env.NC)
	r.waitTool("fixture__slow")
	// Given per-key TTLs in place, its TTL raised past the longest call (see ensureSlots).
	if s, err := r.env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	} else if c := s.CachedInfo().Config; !c.AllowMsgTTL || c.MaxAge < DefaultMaxCallTimeout {
		t.Errorf("the slots bucket kept allow_msg_ttl %v, TTL %s", c.AllowMsgTTL, c.MaxAge)
	}

	first := make(chan subjects.CallResult, 1)
	go func() { first <- r.call("local", "fixture__slow", `{"ms":5000}`) }()
	key := kvToken(subjects.LimitScopeServer) + "." + kvToken("fixture") + ".0"
	waitFor(t, "the first call's slot", func() bool {
		_, err = kv.Get(ctx, key)
		return err == nil
	})
	// Past the bucket's old TTL, the running call still holds its slot.
	time.Sleep(1500 * time.Millisecond)
	if _, err := kv.Get(ctx, key); err != nil {
		t.Errorf("the running call's slot expired (bucket TTL 1 s): %v", err)
	}
	if res := r.call("local", "fixture__slow", `{"ms":1}`); res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("second call while the first runs, cap 1: got %s %+v, want rate_limited", res.Status, res.Error)
	}
	if res := <-first; res.Status != subjects.CallOK {
		t.Errorf("first call: %s %+v", res.Status, res.Error)
	}
}
