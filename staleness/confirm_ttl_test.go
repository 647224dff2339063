package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A confirmation of the list held (a re-list for an expired TTL) that is applied after the
// server's list_changed does not make the list fresh: the re-list may have happened before the
// change, and only the snapshot that follows the list_changed says what the list is now.
func TestConfirmDoesNotClearListChanged(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0
	v := New(func() time.Time { return now })
	ms := int64(1000)
	v.Apply(status("kb", subjects.StatusReady))
	v.Apply(snap("kb", &ms, t0, "search", "drop"))
	now = t0.Add(2 * time.Second)
	if got := v.Tool("kb", "drop").State; got != Expired {
		t.Fatalf("before: %s, want expired", got)
	}
	// The executor re-lists (same content, at t0+2s); before it confirms, the server's
	// list_changed (which removes "drop") reaches the view.
	relistedAt := now
	v.Apply(subjects.RegistryEvent{ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged,
		Server: "kb", Kind: subjects.KindTools, At: now.Add(time.Millisecond)}})
	v.Confirm("kb", subjects.KindTools, "fp-"+t0.String(), relistedAt)
	if got := v.Tool("kb", "drop"); got.State != Stale {
		t.Errorf("after list_changed and a confirmation: %s (%s), want stale", got.State, got.Reason)
	}
	// The snapshot that follows the list_changed decides.
	v.Apply(snap("kb", &ms, now.Add(time.Second), "search"))
	now = now.Add(time.Second)
	if got := v.Tool("kb", "drop").State; got != Removed {
		t.Errorf("after the new snapshot: %s, want removed", got)
	}
	if got := v.Tool("kb", "search").State; got != Fresh {
		t.Errorf("after the new snapshot: %s, want fresh", got)
	}
}

// A long ttlMs (any value a connector accepts, up to 2^53 ms) never wraps around into a short
// or negative duration: the list stays fresh for its ttl.
func TestLongTTL(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	v := New(func() time.Time { return now })
	v.Apply(status("kb", subjects.StatusReady))
	for _, ms := range []int64{1e13, 31536000000000, 1 << 53, 1<<63 - 1} {
		v.Apply(snap("kb", &ms, t0, "search"))
		if got := v.Tool("kb", "search"); got.State != Fresh {
			t.Errorf("ttlMs %d, an hour after listing: %s (%s), want fresh", ms, got.State, got.Reason)
		}
	}
	neg := int64(-5)
	v.Apply(snap("kb", &neg, t0, "search"))
	if got := v.Tool("kb", "search").State; got != Expired {
		t.Errorf("negative ttlMs: %s, want expired", got)
	}
}

func confirmed(server, fp string, at time.Time) subjects.RegistryEvent {
	return subjects.RegistryEvent{Confirmed: &subjects.Confirmed{V: 1, Type: subjects.EventConfirmed, Server: server,
		Kind: subjects.KindTools, Fingerprint: fp, ListedAt: at}}
}

// A Confirmed event on the stream restarts the TTL of the list it names, as Confirm does: a
// consumer that did not ask for the re-list learns of it. One of another fingerprint, or older
// than what the view holds, changes nothing; none lifts a list_changed.
func TestConfirmedEvent(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0
	v := New(func() time.Time { return now })
	ms := int64(1000)
	fp := "fp-" + t0.String()
	v.Apply(status("kb", subjects.StatusReady))
	v.Apply(snap("kb", &ms, t0, "search"))
	now = t0.Add(2 * time.Second)
	if got := v.Tool("kb", "search").State; got != Expired {
		t.Fatalf("before: %s, want expired", got)
	}
	// Another list's confirmation (its snapshot is on its way): still expired.
	v.Apply(confirmed("kb", "fp-other", now))
	if got := v.Tool("kb", "search").State; got != Expired {
		t.Errorf("after another list's confirmation: %s, want expired", got)
	}
	v.Apply(confirmed("kb", fp, now))
	if got := v.Tool("kb", "search"); got.State != Fresh || !got.ListedAt.Equal(now) {
		t.Errorf("after the confirmation: %s listed at %s, want fresh at %s", got.State, got.ListedAt, now)
	}
	// An older confirmation (delivered late) does not move listedAt back.
	v.Apply(confirmed("kb", fp, t0.Add(time.Second)))
	if got := v.Tool("kb", "search").ListedAt; !got.Equal(now) {
		t.Errorf("after an older confirmation: listed at %s, want %s", got, now)
	}
	// A list_changed, then a confirmation of the list held (a re-list made before the change):
	// stale, until the snapshot that follows.
	v.Apply(subjects.RegistryEvent{ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged,
		Server: "kb", Kind: subjects.KindTools, At: now}})
	v.Apply(confirmed("kb", fp, now.Add(time.Millisecond)))
	if got := v.Tool("kb", "search"); got.State != Stale {
		t.Errorf("after list_changed and a confirmation event: %s (%s), want stale", got.State, got.Reason)
	}
	// A confirmation for a server or kind never listed does not make one up.
	v.Apply(confirmed("nobody", fp, now))
	if got := v.Tool("nobody", "search").State; got != Unknown {
		t.Errorf("confirmation of an unknown server: %s, want unknown", got)
	}
}
