package staleness

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Remembers says whether a name is listed or remembered as removed, whatever else the view says
// of the server: the executor keeps a removed tool's definition only while it does.
func TestRemembers(t *testing.T) {
	v := New(nil)
	v.Apply(snap("crm", nil, time.Unix(1, 0), "a", "b"))
	v.Apply(snap("crm", nil, time.Unix(2, 0), "a"))
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "crm", Tools: []string{"*"}}})
	for name, want := range map[string]bool{"a": true, "b": true, "c": false} {
		if got := v.Remembers("crm", subjects.KindTools, name); got != want {
			t.Errorf("Remembers(crm, %s) = %v, want %v", name, got, want)
		}
	}
	if v.Remembers("crm", subjects.KindPrompts, "a") || v.Remembers("other", subjects.KindTools, "a") {
		t.Error("remembers a name of a kind or a server never listed")
	}
}
