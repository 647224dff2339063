package executor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
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

// TestSlotsBucketDeclaredAgainWithoutTTLs: the slots bucket was declared again without per-key
// TTLs while the executor ran (NATS restarted and emptied it, and an executor of an older
// mcpstream declared it first, as a rolling upgrade has them side by side). The executor
// wrote every slot with a TTL, which JetStream refuses on such a bucket ("per-message TTL is
// disabled", not a bucket gone): every call under a concurrency cap was refused unavailable
// until the executor restarted. The bucket is given per-key TTLs again, as at start.
func TestSlotsBucketDeclaredAgainWithoutTTLs(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{
		Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 1}}}}})
	r.waitTool("fixture__slow")
	if res := r.call("local", "fixture__slow", `{"ms":1}`); res.Status != subjects.CallOK {
		t.Fatalf("first call: %s %+v", res.Status, res.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteKeyValue(ctx, subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	}
	// as an older mcpstream declares it
	if _, err := r.env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if res := r.call("local", "fixture__slow", `{"ms":1}`); res.Status != subjects.CallOK {
		t.Fatalf("a call under a cap once the slots bucket was declared again without per-key TTLs: %s %+v", res.Status, res.Error)
	}
	if s, err := r.env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket); err != nil {
		t.Fatal(err)
	} else if c := s.CachedInfo().Config; !c.AllowMsgTTL || c.MaxAge < DefaultMaxCallTimeout {
		t.Errorf("the slots bucket kept allow_msg_ttl %v, TTL %s", c.AllowMsgTTL, c.MaxAge)
	}
}

// TestSlotReleasedAfterLostRenewalAck: a renewal JetStream stored whose acknowledgement did not
// come back (a timeout, a leader change) left the lease with the slot's previous revision; the
// release, a delete of that revision only, was refused, and the slot stayed taken until its TTL
// ran out: what was left of the call's timeout plus the lease (up to MaxCallTimeout, 10 min),
// after the call had ended. A slot that still holds the call's own value is its own: released.
func TestSlotReleasedAfterLostRenewalAck(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kv, noTTLs, err := ensureSlots(ctx, env.JS, Config{}.withDefaults(), 1)
	if err != nil || noTTLs != "" {
		t.Fatalf("slots bucket: %q %v", noTTLs, err)
	}
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	l := &limiter{js: env.JS, slots: kv, now: time.Now, owner: "w", prev: map[string]prevWindow{}, lease: DefaultSlotLease}
	ls, refusal, err := l.acquireFor(ctx, "c1", time.Minute, lim)
	if err != nil || refusal != nil {
		t.Fatalf("acquire: %v %+v", err, refusal)
	}
	taken := ls.slots[0].rev
	ls.renew(ctx)
	renewed := ls.slots[0].rev
	if renewed == taken {
		t.Fatal("not renewed")
	}
	ls.slots[0].rev = taken // the renewal's ack lost: stored, its revision unknown here
	ls.renew(ctx)
	if ls.slots[0].rev <= renewed {
		t.Fatalf("a renewal after one whose ack was lost: revision %d, want past %d", ls.slots[0].rev, renewed)
	}
	ls.slots[0].rev = taken // lost again
	ls.release(ctx)
	if e, err := kv.Get(ctx, kvToken(subjects.LimitScopeServer)+".s.0"); err == nil {
		t.Fatalf("the ended call's slot is still taken (revision %d, %q): the cap is full until its TTL", e.Revision(), e.Value())
	}
	// Another lease's slot, even of another delivery of the same call, is not released by a
	// stale lease of this one.
	other, refusal, err := l.acquireFor(ctx, "c1", time.Minute, lim)
	if err != nil || refusal != nil {
		t.Fatalf("acquire after release: %v %+v", err, refusal)
	}
	stale := &lease{l: l, slots: []slotLease{{key: other.slots[0].key, rev: taken}}, val: ls.val}
	stale.release(ctx)
	if _, err := kv.Get(ctx, other.slots[0].key); err != nil {
		t.Fatalf("a stale lease released another call's slot: %v", err)
	}
	other.release(ctx)
}
