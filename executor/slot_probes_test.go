package executor

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// kvOpsSync is the subject settle publishes on.
const kvOpsSync = "mcpstream.test.kvops.sync"

// kvOps counts the requests the clients of env send to the slots bucket: writes (publishes on
// the bucket's subjects, stored or refused) and reads (direct and API message gets).
type kvOps struct {
	writes, reads atomic.Int64
	sync          chan struct{}
}

func countKVOps(t *testing.T, env *natstest.Env) *kvOps {
	t.Helper()
	nc := env.Connect(t)
	ops := &kvOps{sync: make(chan struct{}, 1)}
	stream := "KV_" + subjects.SlotsBucket
	for subject, n := range map[string]*atomic.Int64{
		"$KV." + subjects.SlotsBucket + ".>":  &ops.writes,
		"$JS.API.DIRECT.GET." + stream + ".>": &ops.reads,
		"$JS.API.DIRECT.GET." + stream:        &ops.reads,
		"$JS.API.STREAM.MSG.GET." + stream:    &ops.reads,
		kvOpsSync:                             nil,
	} {
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
			if n == nil {
				ops.sync <- struct{}{}
				return
			}
			n.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// settle returns the counts once every request env.NC sent so far has been counted: a message
// published after them on the same connection arrives after them.
func (o *kvOps) settle(t *testing.T, env *natstest.Env) (writes, reads int64) {
	t.Helper()
	if err := env.NC.Publish(kvOpsSync, nil); err != nil {
		t.Fatal(err)
	}
	<-o.sync
	return o.writes.Load(), o.reads.Load()
}

// TestSlotRefusalCost: a call refused by a full concurrency cap of 32 tried to Create every one
// of the 32 slot keys — 32 writes (and 32 reads) on NATS for each refusal, when NATS is busiest.
// A refusal now reads the slots and writes none; the cap is never exceeded, and a slot that
// frees up is found by the next caller.
func TestSlotRefusalCost(t *testing.T) {
	env := natstest.Start(t)
	l := newTestLimiter(t, env, Config{})
	const cap = 32
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: cap}}}
	ctx := context.Background()

	var held []*lease
	for i := 0; len(held) < cap && i < 100*cap; i++ {
		ls, refusal, err := l.acquire(ctx, "held"+strconv.Itoa(i), lim)
		if err != nil {
			t.Fatal(err)
		}
		if refusal == nil {
			held = append(held, ls)
		}
	}
	if len(held) != cap {
		t.Fatalf("took %d slots of %d", len(held), cap)
	}

	ops := countKVOps(t, env)
	const refusals = 10
	for i := range refusals {
		_, refusal, err := l.acquire(ctx, "over"+strconv.Itoa(i), lim)
		if err != nil || refusal == nil || refusal.Code != subjects.CodeRateLimited {
			t.Fatalf("call %d past a full cap: got %v %+v, want rate_limited", i, err, refusal)
		}
	}
	writes, reads := ops.settle(t, env)
	t.Logf("%d refusals at a cap of %d: %d writes, %d reads", refusals, cap, writes, reads)
	if writes != 0 {
		t.Errorf("%d refusals at a full cap wrote %d times to the slots bucket, want 0", refusals, writes)
	}
	if reads > refusals*cap {
		t.Errorf("%d refusals at a full cap read %d slots, want at most %d each", refusals, reads, cap)
	}

	// One slot frees up: callers racing for it never take more than it, and one of them
	// takes it.
	held[cap/2].release(ctx)
	var got atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, refusal, err := l.acquire(ctx, "race"+strconv.Itoa(i), lim); err == nil && refusal == nil {
				got.Add(1)
			}
		})
	}
	wg.Wait()
	if got.Load() != 1 {
		t.Fatalf("one slot freed: %d calls took it, want 1", got.Load())
	}
	// And the cap is full again.
	if _, refusal, err := l.acquire(ctx, "full", lim); err != nil || refusal == nil {
		t.Fatalf("past the cap: got %v %+v, want rate_limited", err, refusal)
	}
}
