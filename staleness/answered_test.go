package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A Confirmed event lifts a list_changed when it answers it: it names the fingerprint the view
// holds and the stream sequence of the ListChanged the list is stale for, or a later one. One
// whose re-list began before that ListChanged (a lower AfterSeq), one without AfterSeq, one of
// another fingerprint, and any confirmation of a list_changed whose sequence the view was not
// told (Seq 0), leave the list stale; a local Confirm never lifts one.
func TestConfirmedAnswersListChanged(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0
	v := New(func() time.Time { return now })
	fp := "fp-" + t0.String()
	v.Apply(status("kb", subjects.StatusReady))
	v.Apply(snap("kb", nil, t0, "search")) // no ttlMs: only the list_changed counts
	changedAt := func(seq uint64) {
		v.Apply(subjects.RegistryEvent{Seq: seq, ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged,
			Server: "kb", Kind: subjects.KindTools, At: now}})
	}
	confirm := func(fp string, after uint64) {
		now = now.Add(time.Second)
		v.Apply(subjects.RegistryEvent{Confirmed: &subjects.Confirmed{V: 1, Type: subjects.EventConfirmed,
			Server: "kb", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: now, AfterSeq: after}})
	}
	check := func(step string, want State) {
		t.Helper()
		if got := v.Tool("kb", "search"); got.State != want {
			t.Errorf("%s: %s (%s), want %s", step, got.State, got.Reason, want)
		}
	}
	changedAt(10)
	check("after list_changed #10", Stale)
	confirm(fp, 0)
	check("confirmation without afterSeq", Stale)
	confirm(fp, 9)
	check("confirmation of a re-list that began before #10", Stale)
	confirm("fp-other", 10)
	check("confirmation of another list", Stale)
	v.Confirm("kb", subjects.KindTools, fp, now)
	check("local confirmation", Stale)
	confirm(fp, 10)
	check("confirmation that answers #10", Fresh)

	// Two list_changed: the list is stale for the later one.
	changedAt(20)
	changedAt(22)
	confirm(fp, 21)
	check("confirmation answering #20, not #22", Stale)
	confirm(fp, 30)
	check("confirmation answering #22 (re-list began after #30)", Fresh)

	// A list_changed whose sequence the view does not know is lifted only by a snapshot.
	changedAt(40)
	changedAt(0)
	changedAt(41)
	confirm(fp, 1<<40)
	check("list_changed of unknown sequence, then a confirmation", Stale)
	v.Apply(snap("kb", nil, now, "search"))
	check("the snapshot that follows", Fresh)
}
