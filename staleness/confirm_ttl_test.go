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
