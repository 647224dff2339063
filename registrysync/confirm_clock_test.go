package registrysync

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestConfirmAfterRestartFromHostAhead: a restarted connector starts from the listedAt of the
// list's last snapshot or confirmation on the stream, stamped by the connector before it — on
// another host, or on this one before its clock was put right. One stamped an hour ahead of
// this clock made the new connector wait that hour past confirmEvery before it confirmed the
// list again: meanwhile no consumer's TTL restarted (every indexer replica showed the list
// expired, every executor re-listed it on its own). A listedAt ahead of this clock is taken as
// when the connector read it, as staleness does.
func TestConfirmAfterRestartFromHostAhead(t *testing.T) {
	env := natstest.Start(t)
	ctx := context.Background()
	m := New(env.JS, env.NC, fastConfig(), testLogger(t))
	sc := ServerConfig{Name: "u.1", URL: "http://127.0.0.1:1/mcp", Transport: TransportHTTP}
	c := newConnector(m, sc)
	if err := c.loadState(ctx); err != nil {
		t.Fatal(err)
	}
	tools := subjects.KindTools
	confSubject := subjects.RegistryConfirmed(sc.Name, tools)
	ttl := int64(time.Hour / time.Millisecond) // confirmed every 30 minutes: time is moved by hand
	l := &listing{Kind: tools, Items: []json.RawMessage{json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)}, TTLMs: &ttl}
	if res, err := c.publishSnapshot(ctx, l, nil); err != nil || !res.published {
		t.Fatalf("first list: %+v %v", res, err)
	}
	// The connector before (its host an hour ahead) confirmed the list.
	ahead := time.Now().UTC().Add(time.Hour)
	data, _ := json.Marshal(subjects.Confirmed{V: subjects.Version, Type: subjects.EventConfirmed, Server: sc.Name, Kind: tools,
		Fingerprint: l.fingerprint(), ListedAt: ahead})
	if _, err := env.JS.Publish(ctx, confSubject, data); err != nil {
		t.Fatal(err)
	}
	confSeq := lastSeq(t, env, confSubject)

	c = newConnector(m, sc)
	if err := c.loadState(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.kind(tools).listedAt; got.After(time.Now()) {
		t.Errorf("restarted connector: listed at %s, ahead of its clock", got)
	}
	// confirmEvery later (time moved by hand), an unchanged re-list confirms the list.
	c.mu.Lock()
	st := c.kstate[tools]
	st.listedAt = st.listedAt.Add(-confirmEvery(&ttl))
	c.kstate[tools] = st
	c.mu.Unlock()
	if _, err := c.publishSnapshot(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	if seq := lastSeq(t, env, confSubject); seq == confSeq {
		t.Errorf("not confirmed %s after a restart: the last confirmation, stamped an hour ahead, held it back", confirmEvery(&ttl))
	}
}
