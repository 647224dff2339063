package staleness

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Tools revoked by name are bounded per server: a revocation past subjects.MaxRevokedTools
// revokes every tool of the server instead (fail closed), and restore "*" undoes it.
func TestRevokedNamesBounded(t *testing.T) {
	v := New(nil)
	v.Apply(snap("crm", nil, time.Unix(1, 0), "keep", "other"))
	revoke := func(tools, restore []string) {
		v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "crm", Tools: tools, Restore: restore}})
	}
	names := make([]string, subjects.MaxRevokedTools)
	for i := range names {
		names[i] = fmt.Sprintf("gone%d", i)
	}
	revoke(names, nil)
	if got := v.Tool("crm", "keep").State; got != Fresh {
		t.Fatalf("keep: %s at the limit, want fresh", got)
	}
	revoke([]string{"one-more"}, nil)
	if n := len(v.servers["crm"].revoked); n > subjects.MaxRevokedTools {
		t.Errorf("%d names kept, want at most %d", n, subjects.MaxRevokedTools)
	}
	if got := v.Tool("crm", "keep").State; got != Revoked {
		t.Errorf("keep: %s past the limit, want revoked (every tool)", got)
	}
	revoke(nil, []string{"*"})
	if got := v.Tool("crm", "keep").State; got != Fresh {
		t.Errorf("keep: %s after restore *, want fresh", got)
	}
}
