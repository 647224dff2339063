package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSlotLeaseOfExistingBucket: the slots bucket keeps the TTL it was created with (an executor
// with a shorter SlotLease declared it first, or this one before its SlotLease was raised), and
// an executor renewed its slots every min(AckWait, its own SlotLease)/3: every 10 s by default,
// against a bucket TTL of 1 s. A running call's slot expired after 1 s and the concurrency cap
// let a second call run beside it. The slots are renewed within the bucket's TTL.
func TestSlotLeaseOfExistingBucket(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kv, err := r.env.JS.CreateKeyValue(ctx, SlotsConfig(time.Second, 1)) // declared by another executor
	if err != nil {
		t.Fatal(err)
	}
	r.startExecutor(r.managerConfig(Config{Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 1}}}}), r.env.NC)
	r.waitTool("fixture__slow")

	first := make(chan subjects.CallResult, 1)
	go func() { first <- r.call("local", "fixture__slow", `{"ms":5000}`) }()
	key := kvToken(subjects.LimitScopeServer) + "." + kvToken("fixture") + ".0"
	var held jetstream.KeyValueEntry
	waitFor(t, "the first call's slot", func() bool {
		held, err = kv.Get(ctx, key)
		return err == nil
	})
	var renewed bool
	waitFor(t, "the slot renewed or gone", func() bool {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return true
		case err != nil:
			t.Fatal(err)
		}
		renewed = e.Revision() != held.Revision()
		return renewed
	})
	if !renewed {
		t.Errorf("the running call's slot expired (bucket TTL 1 s) before it was renewed")
	}
	if res := r.call("local", "fixture__slow", `{"ms":1}`); res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
		t.Errorf("second call while the first runs, cap 1: got %s %+v, want rate_limited", res.Status, res.Error)
	}
	if res := <-first; res.Status != subjects.CallOK {
		t.Errorf("first call: %s %+v", res.Status, res.Error)
	}
}
