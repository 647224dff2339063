package executor

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// ackLostKV is a slots bucket whose Creates JetStream stores, their acknowledgement lost (a
// timeout: NATS busy, a leader change, the connection dropped under it).
type ackLostKV struct{ jetstream.KeyValue }

func (kv ackLostKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if _, err := kv.KeyValue.Create(ctx, key, value, opts...); err != nil {
		return 0, err
	}
	return 0, nats.ErrTimeout
}

// TestSlotCreateAckLost: a call whose slot's Create was stored, its acknowledgement lost, is
// refused (the limits cannot be checked: it does not run) and held the slot all the same, no
// call its own, until the slot's TTL ran out (the call's timeout plus the lease): the cap one
// call lower meanwhile, a cap of 1 refusing every call. The slot holds the lease's own value:
// the refusal frees it.
func TestSlotCreateAckLost(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	capped := []scopeLimit{
		{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}},
		{subjects.LimitScopeTool, "s__t", Rate{Concurrency: 1}},
	}
	slots := l.slots
	l.slots = ackLostKV{slots}
	ls, refusal, err := l.acquireFor(ctx, "lost", 0, capped)
	l.slots = slots
	if err == nil || ls != nil || refusal != nil {
		t.Fatalf("a slot whose Create's acknowledgement was lost: got %v %+v %v, want an error (the call not run)", ls, refusal, err)
	}
	next := mustAcquire(t, l, "next", capped) // (refused rate_limited while the lost slot was held)
	wantCapFull(t, l, "third", capped, "the next call runs")
	next.release(ctx)
}
