package executor

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// gatedSlots is a slots bucket whose reads say when they are answered (read) and whose writes
// wait for gate: a write JetStream takes late (its retries of a stream that does not answer,
// 250 ms apart, or the reconnect buffer of a NATS restart).
type gatedSlots struct {
	jetstream.KeyValue
	read chan struct{}
	gate chan struct{}
}

func (g *gatedSlots) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := g.KeyValue.Get(ctx, key)
	select {
	case g.read <- struct{}{}:
	default:
	}
	return e, err
}

func (g *gatedSlots) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	<-g.gate
	return g.KeyValue.Create(ctx, key, value, opts...)
}

func (g *gatedSlots) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	<-g.gate
	return g.KeyValue.Update(ctx, key, value, rev)
}

func (g *gatedSlots) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	<-g.gate
	return g.KeyValue.Delete(ctx, key, opts...)
}

// gatedPubJS is a JetStream whose synchronous publishes (the renewals with a TTL) wait for gate.
type gatedPubJS struct {
	jetstream.JetStream
	gate chan struct{}
}

func (g *gatedPubJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	<-g.gate
	return g.JetStream.PublishMsg(ctx, msg, opts...)
}

// staleCase is how a stale lease of another executor meets the slots bucket declared again.
type staleCase struct {
	name  string
	renew bool // renewed (its executor's heartbeat), else released
	// late: it reads its slot in the bucket declared again (free there), before the new call
	// takes it; else as the bucket is gone.
	late bool
}

// TestStaleLeaseReadOfLostBucket: a lease of another executor read its slot as the slots bucket
// was gone (the read failed: no stream answers), and went on to write the slot at the revision
// it knew; the write reached the bucket declared again, where a new call held the slot at that
// revision (revisions start over). The release freed the new call's slot, and the renewal wrote
// over it: a third call ran beside it, over a cap of 1. A slot whose bucket is gone went with
// it: nothing of the lease's is written at its old revision.
func TestStaleLeaseReadOfLostBucket(t *testing.T) {
	for _, c := range []staleCase{{"release", false, false}, {"renew", true, false}, {"renew late", true, true}} {
		renew := c.renew
		t.Run(c.name, func(t *testing.T) {
			env := natstest.Start(t)
			other, mine := restoringLimiter(t, env, "other"), restoringLimiter(t, env, "mine")
			lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
			stale := mustAcquire(t, other, "stale", lim)
			key, rev := stale.slots[0].key, stale.slots[0].rev
			gs := &gatedSlots{KeyValue: other.slots, read: make(chan struct{}, 1), gate: make(chan struct{})}
			other.slots, other.js = gs, &gatedPubJS{JetStream: other.js, gate: gs.gate}
			var once sync.Once
			open := func() { once.Do(func() { close(gs.gate) }) }
			t.Cleanup(open)

			loseSlots(t, env)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			done := make(chan struct{})
			start := func() {
				go func() {
					defer close(done)
					if renew {
						stale.renew(ctx) // (its executor's heartbeat)
					} else {
						stale.release(ctx)
					}
				}()
				<-gs.read
			}
			if !c.late {
				start()
			}
			st, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false) // (another executor's restore)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ { // (the new bucket's next write at the stale lease's revision)
				s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
				if err != nil {
					t.Fatal(err)
				}
				if last := s.CachedInfo().State.LastSeq; last+1 == rev {
					break
				} else if last+1 > rev || i > 1000 {
					t.Fatalf("the new bucket is at %d, past the stale revision %d", last, rev)
				}
				if _, err := st.slots.Put(ctx, "pad", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if c.late {
				start()
			}
			held := mustAcquire(t, mine, "held", lim)
			if held.slots[0].key != key || held.slots[0].rev != rev {
				t.Fatalf("precondition: the new call's slot %s@%d, want %s@%d", held.slots[0].key, held.slots[0].rev, key, rev)
			}
			open() // (the stale lease's write arrives)
			<-done
			if renew {
				stale.release(ctx)
			}
			wantCapFull(t, mine, "third", lim, "a stale lease that read its slot as the bucket was gone freed or took the slot of the call holding the cap of 1")
			held.release(ctx)
			stale.release(ctx)
			mustAcquire(t, mine, "after", lim).release(ctx) // (no slot leaked)
		})
	}
}
