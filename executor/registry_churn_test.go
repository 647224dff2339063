package executor

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A server that renames its tools on every re-list (a version or a session id in the name) must
// not grow the executor's tool table forever: the table keeps a removed tool (so a call of it is
// refused stale, "no longer listed") only as long as the view remembers it as removed
// (staleness.MaxRemembered names per server), as the view itself does. Each entry holds the
// tool's names and hints (not its definition: see TestRemovedToolsKeepNoDefinition).
// Every tool of the server revoked by an operator does not change that.
func TestRegistryForgetsRenamedToolsAsTheViewDoes(t *testing.T) {
	for _, revoked := range []bool{false, true} {
		t.Run(fmt.Sprintf("revoked=%v", revoked), func(t *testing.T) { testRenamedTools(t, revoked) })
	}
}

func testRenamedTools(t *testing.T, revoked bool) {
	reg := newRegistry(zerolog.Nop())
	applyTo(t, reg, &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady})
	if revoked {
		data, _ := json.Marshal(subjects.Revocation{V: subjects.Version, Type: subjects.EventRevoked, Server: "dyn", Tools: []string{"*"}})
		reg.apply(subjects.RegistryRevoked("dyn"), data, reg.applied.Load()+1)
		if v := reg.view.Tool("dyn", "any"); v.State != staleness.Revoked {
			t.Fatalf("revocation not applied: %s", v.State)
		}
	}
	// n re-lists of stable and k renamed tools: 1.5 × staleness.MaxRemembered names removed,
	// past the bound once.
	const k = 50
	const n = 3 * staleness.MaxRemembered / 2 / k
	at := time.Now().UTC()
	for i := range n {
		names := []string{"stable"}
		for j := range k {
			names = append(names, fmt.Sprintf("tool_v%d_%d", i, j))
		}
		applyTo(t, reg, toolsOf("dyn", at, nil, names...))
	}
	reg.mu.RLock()
	size := len(reg.tools)
	var forgotten []string // entries the view no longer knows
	for _, tl := range reg.tools {
		if !reg.view.Remembers(tl.Server, subjects.KindTools, tl.Name) {
			forgotten = append(forgotten, tl.Public)
		}
	}
	reg.mu.RUnlock()
	if size > staleness.MaxRemembered+2*k {
		t.Errorf("%d tools in the table after %d re-lists of %d tools, want at most %d: removed tools are never forgotten",
			size, n, k+1, staleness.MaxRemembered+2*k)
	}
	if len(forgotten) > 0 {
		t.Errorf("%d tools in the table the view forgot (e.g. %s)", len(forgotten), forgotten[0])
	}
	// What the view remembers still resolves: the listed tools, and the one just removed (a
	// call of it is refused stale, not not_found).
	for _, name := range []string{"stable", fmt.Sprintf("tool_v%d_0", n-1), fmt.Sprintf("tool_v%d_%d", n-2, k-1)} {
		if reg.lookup(subjects.PublicName("dyn", name)) == nil {
			t.Errorf("%s: not in the table", name)
		}
	}
	if v := reg.view.Tool("dyn", fmt.Sprintf("tool_v%d_0", n-2)); !revoked && v.State != staleness.Removed {
		t.Errorf("tool_v%d_0: %s, want removed", n-2, v.State)
	}
	if got := reg.names.Lookup(subjects.PublicName("dyn", "tool_v0_0")); len(got) > 0 {
		t.Errorf("suggestion index still holds tool_v0_0")
	}
}

// A server removed and configured again with other tools, again and again, does not keep every
// tool it ever had either.
func TestRegistryForgetsToolsOfServerRemovedAndAddedAgain(t *testing.T) {
	reg := newRegistry(zerolog.Nop())
	// n times, with k tools each time: 1.5 × staleness.MaxRemembered names removed, past the
	// bound once.
	const k = 50
	const n = 3 * staleness.MaxRemembered / 2 / k
	at := time.Now().UTC()
	for i := range n {
		names := make([]string, k)
		for j := range names {
			names[j] = fmt.Sprintf("tool_%d_%d", i, j)
		}
		applyTo(t, reg,
			&subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "churn", Status: subjects.StatusReady},
			toolsOf("churn", at, nil, names...),
			&subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "churn", Status: subjects.StatusRemoved},
			toolsOf("churn", at, nil), // Remove retracts every kind with an empty snapshot
		)
	}
	reg.mu.RLock()
	size := len(reg.tools)
	reg.mu.RUnlock()
	if size > staleness.MaxRemembered+k {
		t.Errorf("%d tools in the table after the server was removed and added %d times, want at most %d",
			size, n, staleness.MaxRemembered+k)
	}
	// The last removal still answers "removed" for its tools.
	last := subjects.PublicName("churn", fmt.Sprintf("tool_%d_%d", n-1, k-1))
	if reg.lookup(last) == nil {
		t.Errorf("%s: not in the table", last)
	}
}
