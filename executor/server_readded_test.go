package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestServerAddedAgainBeforeListed: a server removed and then added again under its name is
// refused stale (removed) for the tools of its old list until it lists them again, by the
// executor as by the catalog. The executor's view kept the old list across the removal: with
// the server's next status (connecting, ready) its tools were unavailable, then fresh, and a
// call of one went through, while every catalog replica said it was removed.
func TestServerAddedAgainBeforeListed(t *testing.T) {
	now := time.Now()
	st := func(s string) diffEvent {
		return diffEvent{subjects.RegistryStatus("crm"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "crm", Status: s, At: now}}
	}
	events := []diffEvent{
		st(subjects.StatusReady),
		{subjects.RegistrySnapshot("crm", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "crm", Kind: subjects.KindTools,
			Fingerprint: "f1", ListedAt: now, Pages: 1, Items: []json.RawMessage{
				json.RawMessage(`{"name":"lookup","inputSchema":{"type":"object","required":["x"],"properties":{"x":{"type":"string"}}}}`)}}},
		st(subjects.StatusRemoved),
		st(subjects.StatusConnecting),
		st(subjects.StatusReady),
	}
	r, _, cl := startBoth(t, nil, events)
	res := r.call("local", "crm__lookup", `{}`)
	if res.Error == nil || res.Error.Code != subjects.CodeStale || !strings.Contains(res.Error.Message, "no longer listed") {
		t.Errorf("call of a tool of the old list: %s %+v, want stale (no longer listed)", res.Status, res.Error)
	}
	det, err := cl.Details(t.Context(), "local", subjects.DetailsRequest{V: 1, Names: []string{"crm__lookup"}})
	if err != nil {
		t.Fatal(err)
	}
	if det.Error == nil || det.Error.Reason != subjects.StateRemoved {
		t.Errorf("catalog details: %+v, want removed", det.Error)
	}
}

// TestServerRemovedLargeListRefusedStale: a server with as many tools as the bound on the removed
// names remembered (staleness.MaxRemembered, the catalog's; lowered for both here: 50,000
// tools took the executor and the catalog 20 s under -race alone, past waitLimit on a loaded machine) or more is
// removed as `servers remove` does it (its removed status, then an empty tools snapshot), and
// added again: a call of a tool of its old list is refused stale (removed), as the catalog
// answers removed (of those it still remembers). The view moved the whole list into the names it remembers beyond its list,
// and the retraction found them past the bound and forgot them: the executor dropped their
// entries and answered not_found.
func TestServerRemovedLargeListRefusedStale(t *testing.T) {
	now := time.Now()
	st := func(s string) diffEvent {
		return diffEvent{subjects.RegistryStatus("big"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "big", Status: s, At: now}}
	}
	list := func(fp string, n int) diffEvent {
		items := make([]json.RawMessage, n)
		for i := range items {
			items[i] = json.RawMessage(fmt.Sprintf(`{"name":"t%05d","inputSchema":{"type":"object"}}`, i))
		}
		return diffEvent{subjects.RegistrySnapshot("big", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "big",
			Kind: subjects.KindTools, Fingerprint: fp, ListedAt: now, Pages: 1, Items: items}}
	}
	const bound = 64
	events := []diffEvent{
		st(subjects.StatusReady), list("f1", bound+10),
		st(subjects.StatusRemoved), list("f0", 0), // servers remove
		st(subjects.StatusConnecting), st(subjects.StatusReady),
	}
	r, _, cl := startBothRemembering(t, nil, events, bound)
	lastPub := fmt.Sprintf("big__t%05d", bound+9)
	for _, pub := range []string{"big__t00000", lastPub} {
		res := r.call("local", pub, `{}`)
		if res.Error == nil || res.Error.Code != subjects.CodeStale {
			t.Errorf("call of %s of the old list: %s %+v, want stale (removed)", pub, res.Status, res.Error)
		}
		if pub != lastPub {
			// The catalog remembers as many removed names (indexer.Config.MaxRemoved) in all,
			// forgetting the first (by sequence, then name) of those past it with the next
			// message: it may say not_found of a tool a call is refused stale (README).
			continue
		}
		det, err := cl.Details(t.Context(), "local", subjects.DetailsRequest{V: 1, Names: []string{pub}})
		if err != nil {
			t.Fatal(err)
		}
		if det.Error == nil || det.Error.Reason != subjects.StateRemoved {
			t.Errorf("catalog details of %s: %+v, want removed", pub, det.Error)
		}
	}
}
