package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A list stamped by a connector host whose clock is an hour ahead expires its TTL after it
// reached the view, not after the TTL plus the hour; a later confirmation on this clock is not
// ignored as older than that future time; and a confirmation stamped ahead is taken as now.
func TestListedAtAheadOfThisClock(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0
	v := New(func() time.Time { return now })
	ms := int64(30_000)
	ahead := t0.Add(time.Hour)
	v.Apply(status("kb", subjects.StatusReady))
	v.Apply(snap("kb", &ms, ahead, "search"))
	fp := "fp-" + ahead.String()
	now = t0.Add(31 * time.Second)
	if got := v.Tool("kb", "search"); got.State != Expired {
		t.Fatalf("31 s after the snapshot came, ttl 30 s: %s, want expired", got.State)
	}
	v.Confirm("kb", subjects.KindTools, fp, now) // a re-list by this process
	if got := v.Tool("kb", "search"); got.State != Fresh {
		t.Fatalf("after a confirmation now: %s, want fresh", got.State)
	}
	now = now.Add(31 * time.Second)
	v.Apply(subjects.RegistryEvent{Confirmed: &subjects.Confirmed{V: 1, Type: subjects.EventConfirmed,
		Server: "kb", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: now.Add(time.Hour)}})
	now = now.Add(31 * time.Second)
	if got := v.Tool("kb", "search"); got.State != Expired {
		t.Errorf("31 s after a confirmation stamped an hour ahead: %s, want expired", got.State)
	}
}
