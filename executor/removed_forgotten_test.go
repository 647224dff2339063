package executor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// The executor remembers staleness.MaxRemembered removed tool names per server (each entry
// holds the tool's whole definition), fewer than the catalog's MaxRemoved (names only): past
// it, a call of a tool removed long ago is answered not_found (as for a name never listed),
// not stale, while the catalog's details may still say "removed". README's error-code table
// says so. Through the NATS API, on registry events as registrysync publishes them.
func TestCallOfToolRemovedPastRememberedBound(t *testing.T) {
	r := startRig(t, rigOptions{})
	at := time.Now().UTC()
	r.publishRegistry(subjects.RegistryStatus("dyn"), subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady, At: at})
	names := make([]string, staleness.MaxRemembered+10)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%d", i)
	}
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), toolsOf("dyn", at, nil, append(names, "stable")...))
	r.waitTool("dyn__tool_0")
	// Every tool removed at once but one: remembered (a call is refused stale, "removed").
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), toolsOf("dyn", at, nil, "stable"))
	waitFor(t, "tool_0 removed", func() bool { return r.ex.reg.view.Tool("dyn", "tool_0").State == staleness.Removed })
	if res := r.call("local", "dyn__tool_0", `{}`); res.Error == nil || res.Error.Code != subjects.CodeStale || !strings.Contains(res.Error.Message, "removed") {
		t.Fatalf("tool_0 just removed: got %s %+v, want stale (removed)", res.Status, res.Error)
	}
	// The next removal takes the names remembered past MaxRemembered: tool_0 is forgotten.
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), toolsOf("dyn", at, nil, "other"))
	waitFor(t, "stable removed", func() bool { return r.ex.reg.view.Tool("dyn", "stable").State == staleness.Removed })
	if res := r.call("local", "dyn__stable", `{}`); res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Fatalf("stable just removed: got %s %+v, want stale", res.Status, res.Error)
	}
	if res := r.call("local", "dyn__tool_0", `{}`); res.Error == nil || res.Error.Code != subjects.CodeNotFound {
		t.Fatalf("tool_0 removed %d names ago: got %s %+v, want not_found (forgotten)", len(names), res.Status, res.Error)
	}
}
