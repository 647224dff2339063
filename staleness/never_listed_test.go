package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A list_changed of a kind the server never listed (it came before the first listing, or the
// first listing failed) does not list it: while the server is not ready, every item of that
// kind is unavailable (the package doc's exception to "unknown"), as it is without the
// list_changed; once the server is ready and has still not listed it, unknown.
func TestListChangedOfNeverListedKind(t *testing.T) {
	for _, seq := range []uint64{0, 7} {
		v := New(nil)
		v.Apply(status("kb", subjects.StatusConnecting))
		if got := v.Tool("kb", "search"); got.State != Unavailable {
			t.Fatalf("seq %d: before the list_changed: %s (%s), want unavailable", seq, got.State, got.Reason)
		}
		v.Apply(subjects.RegistryEvent{Seq: seq, ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged,
			Server: "kb", Kind: subjects.KindTools, At: time.Now()}})
		if got := v.Tool("kb", "search"); got.State != Unavailable {
			t.Errorf("seq %d: after a list_changed of a kind never listed, server connecting: %s (%s), want unavailable", seq, got.State, got.Reason)
		}
		if v.Remembers("kb", subjects.KindTools, "search") {
			t.Errorf("seq %d: a list_changed made the view remember a name never listed", seq)
		}
		v.Apply(status("kb", subjects.StatusUnavailable))
		if got := v.Tool("kb", "search"); got.State != Unavailable {
			t.Errorf("seq %d: server unavailable: %s (%s), want unavailable", seq, got.State, got.Reason)
		}
		v.Apply(status("kb", subjects.StatusReady))
		if got := v.Tool("kb", "search"); got.State != Unknown {
			t.Errorf("seq %d: server ready, kind never listed: %s (%s), want unknown", seq, got.State, got.Reason)
		}
		// The first snapshot lists it, and lifts the list_changed.
		v.Apply(snap("kb", nil, time.Now(), "search"))
		if got := v.Tool("kb", "search"); got.State != Fresh {
			t.Errorf("seq %d: listed: %s (%s), want fresh", seq, got.State, got.Reason)
		}
	}
}
