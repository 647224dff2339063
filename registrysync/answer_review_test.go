package registrysync

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// publishRaw stores one registry event as any NATS client allowed on registry subjects could
// (another registrysync process of the server, or a hostile one).
func publishRaw(t *testing.T, h *harness, subject string, v any) uint64 {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := h.env.JS.Publish(ctx, subject, data)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// replayed is the freshness of fx's echo tool in a view that applied every recorded event.
func replayed(rec *recorder) staleness.Verdict {
	v := staleness.New(nil)
	for _, e := range rec.all() {
		ev := e.ev
		ev.Seq = e.seq
		v.Apply(ev)
	}
	return v.Tool("fx", "echo")
}

// answered waits for the event that answers the ListChanged at changed: a tools snapshot, or a
// Confirmed whose afterSeq is at least changed.
func answered(rec *recorder, changed uint64) event {
	return rec.wait(changed, "the answer to list_changed", func(e event) bool {
		return isSnapshot(subjects.KindTools, nil)(e) ||
			e.ev.Confirmed != nil && e.ev.Confirmed.Kind == subjects.KindTools && e.ev.Confirmed.AfterSeq >= changed
	})
}

// currentAfter waits for the answer to the tools ListChanged at changed (answered) and returns
// the snapshot it makes current: the answer itself, or for a Confirmed the snapshot of its
// fingerprint stored before it. Which one depends on timing, not on the connector: a re-list
// under way when the server changes its list (the one a legacy GET stream opening after ready
// asks for, say) may list the new list before the server's notification comes, and store it
// before the ListChanged, which the re-list after it then answers with a Confirmed.
func currentAfter(t *testing.T, rec *recorder, changed uint64) event {
	t.Helper()
	ans := answered(rec, changed)
	cf := ans.ev.Confirmed
	if cf == nil {
		return ans
	}
	evs := rec.all()
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.seq < ans.seq && isSnapshot(subjects.KindTools, nil)(e) && e.ev.Snapshot.Fingerprint == cf.Fingerprint {
			return e
		}
	}
	t.Fatalf("list_changed #%d answered by a confirmation of %s, which no tools snapshot before #%d holds", changed, cf.Fingerprint, ans.seq)
	return event{}
}

// Another connector of the server (or a snapshot whose ack was lost) stored a list the
// connector does not know of. A spurious list_changed then finds the server's list equal to
// the one the connector remembers, not to the stream's: answering it with a Confirmed of the
// remembered fingerprint lifts nothing in consumers (they hold the other list), and the
// server's tools stay stale, refused, until the list really changes. The answer must be a
// snapshot of what the server lists.
func TestAnswerNamesTheStreamsList(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv)}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	other := publishRaw(t, h, subjects.RegistrySnapshot("fx", subjects.KindTools), subjects.Snapshot{
		V: subjects.Version, Type: subjects.EventSnapshot, Server: "fx", Kind: subjects.KindTools,
		Fingerprint: "another-connectors-list", ListedAt: time.Now().UTC(), Pages: 1, CacheScope: "public",
		Items: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)},
	})
	rec.wait(other-1, "the other list", isSnapshot(subjects.KindTools, nil))

	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(other, "list_changed", isChanged(subjects.KindTools))
	ans := answered(rec, changed.seq)
	if cf := ans.ev.Confirmed; cf != nil && cf.Fingerprint != "another-connectors-list" {
		t.Errorf("list_changed #%d answered by a confirmation of %s (the list #%d), but the stream's list is #%d's",
			changed.seq, cf.Fingerprint, first.seq, other)
	}
	if got := replayed(rec); got.State == staleness.Stale {
		t.Errorf("after the answer #%d: %s (%s), want no longer stale", ans.seq, got.State, got.Reason)
	}
}

// A Confirmed on the stream with a huge afterSeq (any client allowed on registry subjects can
// store one) is read back by a restarting connector as "every ListChanged answered": it never
// answered a later spurious list_changed, and the server's tools stayed stale with no end.
func TestRestartIgnoresAnAfterSeqPastTheConfirmation(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	cfg := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv)})
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	h.stop(t)

	hostile := publishRaw(t, h, subjects.RegistryConfirmed("fx", subjects.KindTools), subjects.Confirmed{
		V: subjects.Version, Type: subjects.EventConfirmed, Server: "fx", Kind: subjects.KindTools,
		Fingerprint: first.ev.Snapshot.Fingerprint, ListedAt: time.Now().UTC(), AfterSeq: math.MaxUint64,
	})
	h2 := run(t, h.env, cfg)
	_ = h2
	ready := rec.wait(hostile, "ready again", isStatus(subjects.StatusReady, ""))

	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
	ans := answered(rec, changed.seq)
	if got := replayed(rec); got.State == staleness.Stale {
		t.Errorf("after the answer #%d: %s (%s), want no longer stale", ans.seq, got.State, got.Reason)
	}
}

// A connector publishes no ListChanged while its own waits for an answer, counting on
// consumers being stale meanwhile. But another connector of the server may answer it first
// (its Confirmed is on the stream, consumers are fresh again): a notification the server sends
// then must still be stored, or the tools it changed stay usable until the re-list.
func TestListChangedAfterAnotherConnectorsAnswer(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	cfg := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv)})
	cfg.Debounce = 3 * time.Second // the re-list waits: the window in which the other answers
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(first.seq, "list_changed", isChanged(subjects.KindTools))
	other := publishRaw(t, h, subjects.RegistryConfirmed("fx", subjects.KindTools), subjects.Confirmed{
		V: subjects.Version, Type: subjects.EventConfirmed, Server: "fx", Kind: subjects.KindTools,
		Fingerprint: first.ev.Snapshot.Fingerprint, ListedAt: time.Now().UTC(), AfterSeq: changed.seq,
	})
	rec.wait(other-1, "the other connector's answer", func(e event) bool { return e.ev.Confirmed != nil })
	if got := replayed(rec); got.State == staleness.Stale {
		t.Fatalf("after the other connector's answer: %s, want no longer stale", got.State)
	}

	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	again := rec.wait(other, "the second list_changed", func(e event) bool {
		return isChanged(subjects.KindTools)(e) || e.ev.Confirmed != nil || isSnapshot(subjects.KindTools, nil)(e)
	})
	if again.ev.ListChanged == nil {
		t.Errorf("the second notification left no list_changed before %s: the tools were usable meanwhile", again)
	}
}
