package executor

import (
	"bytes"
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// unreadKV is a slots bucket whose reads fail as a read NATS does not answer in time (a
// reconnect after a NATS restart, a busy server) while its writes go through.
type unreadKV struct{ jetstream.KeyValue }

func (kv unreadKV) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, nats.ErrTimeout
}

// TestUnreadSlotNotWrittenAtOldRevision: a lease whose slot read failed (not "not found", not
// the state lost: a timeout) renewed and released the slot at the revision it knew. After the
// slots bucket was declared again by another executor (this one's leases not retaken), that
// revision may be another call's slot in the new bucket: the renewal wrote over it (the other
// call's release then refused, the lease holding the slot as its own) and the release deleted
// it while the other call ran, one call more than the cap let through. A slot not read is not
// written: the next renewal reads it again, its TTL frees it.
func TestUnreadSlotNotWrittenAtOldRevision(t *testing.T) {
	for _, op := range []string{"renew", "release"} {
		t.Run(op, func(t *testing.T) {
			env := natstest.Start(t)
			l := newTestLimiter(t, env, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			const pad = 5 // (the same revision in the bucket declared again)
			padSlots := func() {
				for range pad {
					if _, err := l.slots.Put(ctx, "pad", []byte("x")); err != nil {
						t.Fatal(err)
					}
				}
			}
			capped := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
			padSlots()
			old := mustAcquire(t, l, "old", capped)

			loseSlots(t, env)
			if _, err := ensureState(ctx, env.JS, Config{}.withDefaults(), false); err != nil {
				t.Fatal(err)
			}
			padSlots()
			other := mustAcquire(t, l, "other", capped) // (the slot free in the new bucket)
			if old.slots[0].key != other.slots[0].key || old.slots[0].rev != other.slots[0].rev {
				t.Fatalf("precondition: the other call's slot %+v, want the old lease's key and revision %+v", other.slots[0], old.slots[0])
			}

			slots := l.slots
			l.slots = unreadKV{slots}
			if op == "renew" {
				old.renew(ctx)
			} else {
				old.release(ctx)
			}
			l.slots = slots

			e, err := slots.Get(ctx, other.slots[0].key)
			if err != nil || !bytes.Equal(e.Value(), other.val) {
				t.Fatalf("after the old lease's %s with its read failed: the other call's slot is %v (%v), want it the other call's", op, e, err)
			}
			wantCapFull(t, l, "third", capped, "the other call runs")
			other.release(ctx)
		})
	}
}
