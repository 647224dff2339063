package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// bigTool is a tool definition of about size bytes: its inputSchema holds a long description
// and the property given; its outputSchema another long description.
func bigTool(name, property string, size int) json.RawMessage {
	pad := strings.Repeat("x", size/2)
	return json.RawMessage(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object","description":%q,"properties":{%q:{"type":"integer"}},"required":[%q],"additionalProperties":false},"outputSchema":{"type":"object","description":%q}}`,
		name, pad, property, property, pad))
}

func bigList(server, fp string, items ...json.RawMessage) *subjects.Snapshot {
	return &subjects.Snapshot{V: subjects.Version, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools,
		Fingerprint: fp, ListedAt: time.Now().UTC(), Items: items}
}

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A server that renames its big tools on every re-list does not make the executor hold every
// definition it ever listed: the table keeps a removed tool (so that a call of it is refused
// stale, "removed") while the view remembers it, but only its names and hints, not its
// schemas nor their compiled state. Before, each of staleness.MaxRemembered removed names a
// server kept its whole definition (up to subjects.MaxDefinitionBytes): about 2 GiB a server.
func TestRemovedToolsKeepNoDefinition(t *testing.T) {
	const (
		perList = 8
		size    = 64 << 10 // 8 × 64 KiB: 512 KiB of schemas a list
		lists   = 10
	)
	// The heap is the whole test binary's: memory another test's goroutines (a rig still
	// shutting down) free between two readings makes one list look smaller than its schemas.
	// Such a reading is taken again, on a new registry, up to three times; a registry that keeps
	// removed definitions grows by nine lists on every try.
	var one, grown uint64
	for try := 0; try < 3; try++ {
		one, grown = measureRemovedDefinitions(t, perList, size, lists)
		t.Logf("one list: %d KiB; %d lists: %d KiB", one>>10, lists, grown>>10)
		if one >= perList*size {
			break
		}
	}
	// The listed tools hold one list's definitions; the removed ones (9 lists) held nine times
	// as much. Generous: three lists' worth.
	if one < perList*size || grown > 3*one {
		t.Errorf("the registry grew by %d KiB over %d lists of %d KiB of definitions (one list: %d KiB), want at most %d KiB: removed tools hold their definitions",
			grown>>10, lists, perList*size>>10, one>>10, 3*one>>10)
	}
}

// measureRemovedDefinitions lists lists lists of perList big tools of size bytes, each list
// renaming every tool, on a new registry; it checks that the removed tools hold no definition,
// and returns what the first list added to the heap and what all of them did.
func measureRemovedDefinitions(t *testing.T, perList, size, lists int) (one, grown uint64) {
	t.Helper()
	reg := newRegistry(zerolog.Nop())
	applyTo(t, reg, &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady})
	list := func(l int) {
		items := make([]json.RawMessage, perList)
		for i := range items {
			items[i] = bigTool(fmt.Sprintf("tool_v%d_%d", l, i), "n", size)
		}
		applyTo(t, reg, bigList("dyn", fmt.Sprintf("f%d", l), items...))
		// Every definition of the list compiled, as calls of them would (the compiled state
		// is retained by the entry too).
		reg.mu.RLock()
		defer reg.mu.RUnlock()
		for _, tl := range reg.sorted["dyn"] {
			if err := tl.schema.check(tl.InputSchema); err != nil {
				t.Fatalf("%s: %v", tl.Public, err)
			}
			if err := tl.output.check(tl.OutputSchema); err != nil {
				t.Fatalf("%s: %v", tl.Public, err)
			}
		}
	}
	before := heapAlloc()
	list(0)
	first := heapAlloc()
	one = first - min(before, first) // what one list's tools hold, raw and compiled
	for l := 1; l < lists; l++ {
		list(l)
	}
	after := heapAlloc()
	grown = after - min(before, after)
	runtime.KeepAlive(reg)

	reg.mu.RLock()
	var removed, held int
	for _, tl := range reg.tools {
		if v := reg.view.Tool(tl.Server, tl.Name); v.State != staleness.Removed {
			continue
		}
		removed++
		if tl.InputSchema != nil || tl.OutputSchema != nil {
			held++
		}
	}
	entries := len(reg.tools)
	reg.mu.RUnlock()
	if want := (lists - 1) * perList; removed != want || entries != lists*perList {
		t.Fatalf("%d entries, %d removed; want %d, %d removed", entries, removed, lists*perList, want)
	}
	if held > 0 {
		t.Errorf("%d of %d removed tools still hold their definitions", held, removed)
	}
	return one, grown
}

// describe says what an entry holds, without its schemas' bytes.
func describe(tl *tool) string {
	if tl == nil {
		return "none"
	}
	return fmt.Sprintf("%s (inputSchema %d bytes, outputSchema %d bytes)", tl.Public, len(tl.InputSchema), len(tl.OutputSchema))
}

// sentDispatcher answers every call ok and records what it was sent.
type sentDispatcher struct {
	mu   sync.Mutex
	sent []subjects.DispatchRequest
}

func (d *sentDispatcher) Dispatch(_ context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	d.sent = append(d.sent, req)
	d.mu.Unlock()
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[],"structuredContent":{}}`)}
}

func (d *sentDispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sent)
}

// A call of a removed tool is refused stale with the message it had when the table kept the
// whole definition; a tool removed and listed again runs under its new definition (its new
// inputSchema checks the arguments), not one the removal left. Through the NATS API.
func TestRemovedToolRefusedThenListedAgain(t *testing.T) {
	disp := &sentDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp}})
	r.publishRegistry(subjects.RegistryStatus("dyn"), subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady, At: time.Now().UTC()})
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), bigList("dyn", "f1", bigTool("big", "a", 64<<10)))
	r.waitTool("dyn__big")
	if res := r.call("local", "dyn__big", `{"a":1}`); res.Status != subjects.CallOK {
		t.Fatalf("listed: got %s %+v, want ok", res.Status, res.Error)
	}

	// Removed (another tool listed instead): refused stale, the same message as before.
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), bigList("dyn", "f2", bigTool("other", "a", 1<<10)))
	waitFor(t, "big removed", func() bool { return r.ex.reg.view.Tool("dyn", "big").State == staleness.Removed })
	if tl := r.ex.reg.lookup("dyn__big"); tl == nil || tl.InputSchema != nil || tl.OutputSchema != nil {
		t.Errorf("removed big: entry %s, want one without its definition", describe(tl))
	}
	for _, args := range []string{`{"a":1}`, `{"b":1}`} { // arguments are not checked: it is refused first
		res := r.call("local", "dyn__big", args)
		const msg = "dyn__big is removed: big is no longer listed by dyn"
		if res.Error == nil || res.Error.Code != subjects.CodeStale || res.Error.Message != msg || res.Error.Reason != "big is no longer listed by dyn" {
			t.Errorf("removed, %s: got %s %+v, want stale %q", args, res.Status, res.Error, msg)
		}
	}
	// The server removed too: the reason says so, as before.
	r.publishRegistry(subjects.RegistryStatus("dyn"), subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusRemoved, At: time.Now().UTC()})
	waitFor(t, "dyn removed", func() bool { return r.ex.reg.view.Tool("dyn", "other").State == staleness.Removed })
	if res := r.call("local", "dyn__other", `{"a":1}`); res.Error == nil || res.Error.Code != subjects.CodeStale ||
		res.Error.Message != "dyn__other is removed: server dyn was removed" {
		t.Errorf("server removed: got %s %+v, want stale (server dyn was removed)", res.Status, res.Error)
	}
	if n := disp.count(); n != 1 {
		t.Fatalf("%d dispatches, want 1 (removed tools are not called)", n)
	}

	// Listed again with another definition (b, not a): it runs under that one.
	r.publishRegistry(subjects.RegistryStatus("dyn"), subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady, At: time.Now().UTC()})
	r.publishRegistry(subjects.RegistrySnapshot("dyn", subjects.KindTools), bigList("dyn", "f3", bigTool("big", "b", 64<<10)))
	waitFor(t, "big listed again", func() bool { return r.ex.reg.view.Tool("dyn", "big").State == staleness.Fresh })
	if res := r.call("local", "dyn__big", `{"a":1}`); res.Error == nil || res.Error.Code != subjects.CodeInvalidArguments {
		t.Errorf("listed again, old arguments: got %s %+v, want invalid_arguments", res.Status, res.Error)
	}
	if res := r.call("local", "dyn__big", `{"b":2}`); res.Status != subjects.CallOK {
		t.Errorf("listed again, new arguments: got %s %+v, want ok", res.Status, res.Error)
	}
	if n := disp.count(); n != 2 {
		t.Fatalf("%d dispatches, want 2", n)
	}
	disp.mu.Lock()
	last := disp.sent[len(disp.sent)-1]
	disp.mu.Unlock()
	if last.Tool != "big" || string(last.Arguments) != `{"b":2}` {
		t.Errorf("sent %s %s, want big {\"b\":2}", last.Tool, last.Arguments)
	}
}

// The table's bound on removed tools is the view's, which is the catalog's (50,000): past it,
// the names removed longest ago are forgotten (a call of one is not_found), the recent ones
// still refused stale, with entries that hold no definition.
func TestRemovedBoundIsTheCatalogs(t *testing.T) {
	if staleness.MaxRemembered != 50_000 {
		t.Fatalf("staleness.MaxRemembered = %d, want the catalog's 50,000 (indexer.DefaultMaxRemoved)", staleness.MaxRemembered)
	}
	reg := newRegistry(zerolog.Nop())
	applyTo(t, reg, &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "dyn", Status: subjects.StatusReady})
	at := time.Now().UTC()
	// 11 lists of 6,000 names: the removals reach the bound with list 9 (54,000 names
	// remembered), and list 10 finds them past it: every name but list 9's is forgotten at
	// once (as the view forgets them, and as before with the lower bound).
	const lists, per = 11, 6_000
	for l := range lists {
		names := make([]string, per)
		for i := range names {
			names[i] = fmt.Sprintf("t%d_%d", l, i)
		}
		applyTo(t, reg, toolsOf("dyn", at, nil, names...))
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	for l := range lists {
		for _, i := range []int{0, per - 1} {
			name := fmt.Sprintf("t%d_%d", l, i)
			tl, v := reg.tools[subjects.PublicName("dyn", name)], reg.view.Tool("dyn", name)
			switch l {
			case lists - 1:
				if tl == nil || tl.InputSchema == nil || v.State != staleness.Fresh {
					t.Errorf("%s (listed): entry %s, %s", name, describe(tl), v.State)
				}
			case lists - 2:
				if tl == nil || tl.InputSchema != nil || v.State != staleness.Removed {
					t.Errorf("%s (removed): entry %s, %s; want a removed entry without its definition", name, describe(tl), v.State)
				}
			default:
				if tl != nil || v.State != staleness.Unknown {
					t.Errorf("%s (forgotten): entry %s, %s; want none, unknown", name, describe(tl), v.State)
				}
			}
		}
	}
	if n := len(reg.tools); n != 2*per {
		t.Errorf("%d entries, want %d", n, 2*per)
	}
}
