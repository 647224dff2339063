package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSlotsUpgradeReplicated: a replicated slots bucket declared by an older mcpstream (TTL
// 30 s, no per-key TTLs, R3 on a cluster) is given per-key TTLs and its TTL raised in place; a
// slot an older executor holds there is kept; slots then taken carry their own TTL, which
// frees them, a renewal rewrites it, and a renewal of a released slot writes nothing.
func TestSlotsUpgradeReplicated(t *testing.T) {
	urls := startCluster(t)
	nc, err := nats.Connect(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var old jetstream.KeyValue
	waitFor(t, "an older mcpstream's replicated slots bucket", func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		old, err = js.CreateKeyValue(c, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket,
			History: 1, TTL: 30 * time.Second, Storage: jetstream.MemoryStorage, Replicas: 3})
		return err == nil
	})
	if _, err := old.Create(ctx, "server.old.0", []byte("old-executor call")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{SlotLease: time.Second}.withDefaults()
	kv, noTTLs, err := ensureSlots(ctx, js, cfg, 3)
	if err != nil || noTTLs != "" {
		t.Fatalf("ensureSlots on a replicated bucket: no per-key TTLs %q, %v", noTTLs, err)
	}
	s, err := js.Stream(ctx, "KV_"+subjects.SlotsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; !c.AllowMsgTTL || c.MaxAge != cfg.slotHold() || c.Replicas != 3 {
		t.Fatalf("upgraded bucket: allow_msg_ttl %v, TTL %s, replicas %d", c.AllowMsgTTL, c.MaxAge, c.Replicas)
	}
	if _, err := kv.Get(ctx, "server.old.0"); err != nil {
		t.Fatalf("the older executor's slot: %v", err)
	}
	// Declared again (another executor starting): nothing to change.
	if _, noTTLs, err := ensureSlots(ctx, js, cfg, 3); err != nil || noTTLs != "" {
		t.Fatalf("ensureSlots again: %q %v", noTTLs, err)
	}

	l := &limiter{js: js, slots: kv, now: time.Now, owner: "w", prev: map[string]prevWindow{}, lease: time.Second}
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	ls, refusal, err := l.acquire(ctx, "c1", lim)
	if err != nil || refusal != nil {
		t.Fatalf("acquire: %v %+v", err, refusal)
	}
	key := ls.slots[0].key
	first := ls.slots[0].rev
	ls.renew(ctx)
	if ls.slots[0].rev == first {
		t.Fatal("the slot was not renewed on the replicated bucket")
	}
	e, err := kv.Get(ctx, key)
	if err != nil || e.Revision() != ls.slots[0].rev {
		t.Fatalf("renewed slot: %v", err)
	}
	held := ls.slots
	ls.release(ctx)
	ls.slots = held // a renewal that comes after the release
	ls.renew(ctx)
	if _, err := kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a renewal after the release wrote the slot again: %v", err)
	}
	ls.slots = nil

	// Not renewed, a slot is freed by its own TTL (1 s), not the bucket's.
	if _, refusal, err := l.acquire(ctx, "c2", lim); err != nil || refusal != nil {
		t.Fatalf("acquire: %v %+v", err, refusal)
	}
	waitFor(t, "the unrenewed slot freed by its TTL", func() bool {
		_, err := kv.Get(ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}
