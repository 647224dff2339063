package registrysync

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A spurious list_changed (the re-list finds the same content) is answered by a small Confirmed
// event naming the ListChanged's stream sequence (afterSeq), not by a second copy of the
// snapshot: the registry stream holds one tools snapshot, and a freshness view that follows the
// stream has the tools stale from the ListChanged to the Confirmed, and usable after it.
func TestSpuriousListChangedAnsweredByConfirmed(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{})
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv)}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	fp := first.ev.Snapshot.Fingerprint

	for round := range 3 {
		srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
		changed := rec.wait(ready.seq, "list_changed "+strconv.Itoa(round), func(e event) bool {
			return isChanged(subjects.KindTools)(e) && e.seq > ready.seq
		})
		cf := rec.wait(changed.seq, "the answer to list_changed "+strconv.Itoa(round), func(e event) bool {
			return e.subject.Event == subjects.EventConfirmed || isSnapshot(subjects.KindTools, nil)(e)
		})
		if cf.ev.Confirmed == nil {
			t.Fatalf("round %d: list_changed #%d answered by %s, want a confirmed event", round, changed.seq, cf)
		}
		var wire struct {
			Fingerprint string `json:"fingerprint"`
			AfterSeq    uint64 `json:"afterSeq"`
		}
		if err := json.Unmarshal(cf.data, &wire); err != nil {
			t.Fatal(err)
		}
		if wire.Fingerprint != fp || wire.AfterSeq != changed.seq {
			t.Errorf("round %d: confirmed %s, want fingerprint %s and afterSeq %d", round, cf.data, fp, changed.seq)
		}
		if want := "fx/tools/" + fp + "/confirmed@" + strconv.FormatUint(changed.seq, 10); cf.msgID != want {
			t.Errorf("round %d: Nats-Msg-Id %q, want %q", round, cf.msgID, want)
		}
		ready = cf
	}

	last := lastSeq(t, h.env, subjects.RegistryServer("fx"))
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	// Every consumer's view, replayed from the stream: stale while a ListChanged waits, fresh
	// once the Confirmed that answers it is applied.
	v := staleness.New(nil)
	snapshots := 0
	for _, e := range rec.all() {
		ev := e.ev
		ev.Seq = e.seq
		v.Apply(ev)
		switch {
		case ev.ListChanged != nil && ev.ListChanged.Kind == subjects.KindTools:
			if got := v.Tool("fx", "echo").State; got != staleness.Stale {
				t.Errorf("after list_changed #%d: %s, want stale", e.seq, got)
			}
		case ev.Confirmed != nil:
			// The fixture's lists carry a ttlMs of 0: expired at once, usable after a re-list.
			if got := v.Tool("fx", "echo"); !got.State.Usable() {
				t.Errorf("after confirmed #%d: %s (%s), want fresh or expired (no longer stale)", e.seq, got.State, got.Reason)
			}
		case isSnapshot(subjects.KindTools, nil)(e):
			snapshots++
		}
	}
	if snapshots != 1 {
		t.Errorf("%d tools snapshots on the stream, want 1 (the list never changed)", snapshots)
	}
}
