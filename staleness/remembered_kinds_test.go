package staleness

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Removed tool names are bounded as the catalog bounds them (MaxRemembered: a tool name is at
// most subjects.MaxToolNameBytes); removed prompt and resource names, whose length has no bound
// of its own, by the lower MaxRememberedItems, as before.
func TestRemovedNamesBoundedByKind(t *testing.T) {
	if MaxRemembered <= MaxRememberedItems {
		t.Fatalf("MaxRemembered %d, MaxRememberedItems %d", MaxRemembered, MaxRememberedItems)
	}
	v := New(nil)
	at := time.Unix(1, 0)
	const per = 500
	lists := MaxRememberedItems/per + 3 // past MaxRememberedItems (and forgotten), far below MaxRemembered
	for l := range lists {
		for _, kind := range []subjects.Kind{subjects.KindTools, subjects.KindPrompts} {
			items := make([]json.RawMessage, per)
			for i := range items {
				items[i], _ = json.Marshal(map[string]any{"name": fmt.Sprintf("n%d_%d", l, i)})
			}
			v.Apply(subjects.RegistryEvent{Snapshot: &subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "s",
				Kind: kind, Fingerprint: fmt.Sprint("f", l), ListedAt: at, Items: items}})
		}
	}
	removed := func(kind subjects.Kind) int { return len(v.servers["s"].kinds[kind].removed) }
	if n, want := removed(subjects.KindTools), (lists-1)*per; n != want {
		t.Errorf("tools: %d removed names remembered, want every one of %d", n, want)
	}
	if n := removed(subjects.KindPrompts); n > MaxRememberedItems+per {
		t.Errorf("prompts: %d removed names remembered, want at most %d", n, MaxRememberedItems+per)
	}
	if !v.Remembers("s", subjects.KindTools, "n0_0") || v.Remembers("s", subjects.KindPrompts, "n0_0") {
		t.Errorf("n0_0: remembered as a tool %v (want true), as a prompt %v (want false)",
			v.Remembers("s", subjects.KindTools, "n0_0"), v.Remembers("s", subjects.KindPrompts, "n0_0"))
	}
}

// A view made with NewRemembering remembers as many removed tool names as it was given, and
// still MaxRememberedItems of other kinds; New's remembers MaxRemembered.
func TestNewRememberingBoundsToolNames(t *testing.T) {
	const bound, per = 100, 60
	at := time.Unix(1, 0)
	list := func(v *View, kind subjects.Kind, l int) {
		items := make([]json.RawMessage, per)
		for i := range items {
			items[i], _ = json.Marshal(map[string]any{"name": fmt.Sprintf("n%d_%d", l, i)})
		}
		v.Apply(subjects.RegistryEvent{Snapshot: &subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "s",
			Kind: kind, Fingerprint: fmt.Sprint("f", l), ListedAt: at, Items: items}})
	}
	small, dflt := NewRemembering(nil, bound), New(nil)
	for l := range 4 { // 180 names removed: the small view forgets the first ones at the third list
		for _, v := range []*View{small, dflt} {
			list(v, subjects.KindTools, l)
			list(v, subjects.KindPrompts, l)
		}
	}
	if small.Remembers("s", subjects.KindTools, "n0_0") || !small.Remembers("s", subjects.KindTools, "n2_0") {
		t.Errorf("bound %d: n0_0 remembered %v (want false), n2_0 %v (want true)", bound,
			small.Remembers("s", subjects.KindTools, "n0_0"), small.Remembers("s", subjects.KindTools, "n2_0"))
	}
	for _, v := range []*View{small, dflt} {
		if !v.Remembers("s", subjects.KindPrompts, "n0_0") {
			t.Errorf("a prompt name forgotten below MaxRememberedItems")
		}
	}
	if !dflt.Remembers("s", subjects.KindTools, "n0_0") {
		t.Errorf("New: n0_0 forgotten below MaxRemembered")
	}
}
