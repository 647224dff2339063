package indexer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestServiceReplyIntoOwnSubjects: NATS checks a publisher's permissions on the subject it
// publishes to, never on the reply subject it names, and the catalog service answered any
// reply subject with the replica's own permissions. A tenant allowed only on
// mcpstream.v1.catalog.acme.> could have it write its replies into another tenant's subjects:
// onto mcpstream.v1.calls.globex (a message the executor takes as globex's), or into the
// executor's concurrency slots of globex (a held slot: globex refused rate_limited). Such a
// request is now not served.
func TestServiceReplyIntoOwnSubjects(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slots, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	acme := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := acme.Request(subjects.CatalogServers("acme"), []byte(`{}`), time.Second)
		return err == nil
	})
	for _, reply := range []string{subjects.Calls("globex"), "$KV." + subjects.SlotsBucket + ".tenant.globex.0"} {
		for _, subject := range []string{subjects.CatalogSearch("acme"), subjects.CatalogServers("acme")} {
			if err := acme.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: []byte(`{"query":"logs"}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Requests of acme's own through the same subscriptions: those above were handled before.
	request(t, acme, subjects.CatalogSearch("acme"), []byte(`{"query":"logs"}`))
	request(t, acme, subjects.CatalogServers("acme"), []byte(`{}`))

	calls, err := env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := calls.GetLastMsgForSubject(ctx, subjects.Calls("globex")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		if m != nil {
			t.Errorf("a catalog reply on globex's calls subject: %.80s", m.Data)
		} else {
			t.Errorf("look up globex's calls subject: %v", err)
		}
	}
	if e, err := slots.Get(ctx, "tenant.globex.0"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		if e != nil {
			t.Errorf("a catalog reply holds globex's concurrency slot: %.80s", e.Value())
		} else {
			t.Errorf("look up globex's slot: %v", err)
		}
	}
}
