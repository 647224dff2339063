package registrysync

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// Another registrysync process runs the server too: it stored a ListChanged for a notification
// of its session and ended (crashed, cut off, its server removed there) before its re-list. This
// connector re-lists the server afterwards (on demand, a resync, a TTL) and finds it unchanged,
// but it answered only the ListChanged events it had stored itself: consumers held the tools
// stale, refused, until this connector's own next notification or a real change. A list that
// began after the ListChanged was stored answers it, whoever stored it.
func TestRelistAnswersAnotherConnectorsListChanged(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	other := publishRaw(t, h, subjects.RegistryChanged("fx", subjects.KindTools), subjects.ListChanged{
		V: subjects.Version, Type: subjects.EventChanged, Server: "fx", Kind: subjects.KindTools, At: time.Now().UTC(),
	})
	rec.wait(first.seq, "the other connector's list_changed", isChanged(subjects.KindTools))
	if got := replayed(rec); got.State != staleness.Stale {
		t.Fatalf("after the other connector's list_changed: %s, want stale", got.State)
	}

	// A re-list that begins once that ListChanged is stored.
	if r := relist(t, h, "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
		t.Fatalf("relist: %+v", r.Error)
	}
	last := lastSeq(t, h.env, subjects.RegistryServer("fx"))
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	if got := replayed(rec); got.State == staleness.Stale {
		t.Errorf("after a re-list that began after list_changed #%d found the list unchanged: %s (%s), want no longer stale",
			other, got.State, got.Reason)
	}
}

// NATS is unreachable a while when a notification comes: both publishes of its ListChanged
// time out, though the stream stored it (the PubAcks were lost), and so does the read of the
// stream's last ListChanged before the re-list. The re-list then found the list unchanged,
// answered nothing and counted as done: nothing listed the kind again, and consumers held the
// tools stale, refused, until the next notification or resync. The re-list must be retried
// until it knows what the stream holds, and answer it.
func TestRelistRetriedWhenTheListChangedCannotBeRead(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	p := startAckDropProxy(t, env.Server.Inner().Addr().String(), subjects.RegistryChanged("fx", subjects.KindTools), 2)
	p.reads = 1
	srv := newFixture(fixtureOptions{})
	// Each of the three lost answers is waited for publishWait: 2 s here, not publishTimeout.
	h, _ := runViaWith(t, env, "nats://"+p.ln.Addr().String(), fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}}),
		func(m *Manager) { m.publishWait = 2 * time.Second })
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
	waitUntil(t, "the read back timed out", func() bool { return p.dropped.Load() == 3 })
	ans := answered(rec, changed.seq)
	if got := replayed(rec); got.State == staleness.Stale {
		t.Errorf("after the answer %s: %s (%s), want no longer stale", ans, got.State, got.Reason)
	}
}
