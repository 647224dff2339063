package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// churnEvent is one registry event of removedChurn, with its subject.
type churnEvent struct {
	subject string
	ev      any
}

// removedChurn returns the events of step i of a random history of the servers' tools: lists
// of some of names (each definition a new inputSchema, some read-only), servers removed and
// added again, revocations and their lifting, list_changed.
func removedChurn(rng *rand.Rand, servers, names []string, i int) churnEvent {
	at := time.Now().UTC()
	s := servers[rng.IntN(len(servers))]
	switch r := rng.IntN(10); {
	case r < 6:
		var items []json.RawMessage
		for _, n := range names {
			if rng.IntN(2) == 0 {
				hint := ""
				if rng.IntN(2) == 0 {
					hint = `,"annotations":{"readOnlyHint":true}`
				}
				items = append(items, json.RawMessage(fmt.Sprintf(
					`{"name":%q,"inputSchema":{"type":"object","properties":{"p%d":{"type":"integer"}}},"outputSchema":{"type":"object"}%s}`, n, i, hint)))
			}
		}
		return churnEvent{subjects.RegistrySnapshot(s, subjects.KindTools), &subjects.Snapshot{V: subjects.Version, Type: subjects.EventSnapshot,
			Server: s, Kind: subjects.KindTools, Fingerprint: fmt.Sprint("f", i), ListedAt: at, Items: items}}
	case r < 7:
		return churnEvent{subjects.RegistryStatus(s), &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: s, Status: subjects.StatusRemoved, At: at}}
	case r < 8:
		return churnEvent{subjects.RegistryStatus(s), &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: s, Status: subjects.StatusReady, At: at}}
	case r < 9:
		rv := &subjects.Revocation{V: subjects.Version, Type: subjects.EventRevoked, Server: s, At: at}
		if n := names[rng.IntN(len(names))]; rng.IntN(2) == 0 {
			rv.Tools = []string{n}
		} else {
			rv.Restore = []string{n}
		}
		return churnEvent{subjects.RegistryRevoked(s), rv}
	default:
		return churnEvent{subjects.RegistryChanged(s, subjects.KindTools), &subjects.ListChanged{V: subjects.Version, Type: subjects.EventChanged,
			Server: s, Kind: subjects.KindTools, At: at}}
	}
}

func applyChurn(t *testing.T, reg *registry, ce churnEvent) {
	t.Helper()
	data, err := json.Marshal(ce.ev)
	if err != nil {
		t.Error(err)
		return
	}
	reg.apply(ce.subject, data, reg.applied.Load()+1)
}

// usedAsDefinition says what is wrong when fresh lets a call of pub go on (s nil) with t: an
// entry without its definition (one a removal left), or another tool's.
func usedAsDefinition(pub string, v staleness.Verdict, t *tool) string {
	switch {
	case t.removed || t.InputSchema == nil || t.OutputSchema == nil:
		return fmt.Sprintf("%s: %s with the entry a removal left (removed %v, inputSchema %d bytes)", pub, v.State, t.removed, len(t.InputSchema))
	case t.Public != pub:
		return fmt.Sprintf("%s: %s with the entry of %s", pub, v.State, t.Public)
	}
	return ""
}

// The entry a tool's removal leaves in the table (its names and hints, not its definition) is
// never what a call goes on with: whatever happened to the tool, its server and its list, a call
// that freshness lets through has the tool's listed definition; and the table's entries are
// either listed or without their definitions, with a verdict that refuses them. Sequentially
// after each event of random histories, then with calls taken while the tool's server removes,
// lists again, is removed and added again (apply changes the table and the view together: read
// apart, a call saw a listed verdict with a removed entry).
func TestRemovedEntryNeverUsedAsDefinition(t *testing.T) {
	// Two of the names have one public name on ghost (a 40-bit hash collision: see
	// TestPublicNameCollisionKeepsTheHolder), so one holds it while the other is refused.
	long := strings.Repeat("a", 62)
	servers, names := []string{"ghost", "b"}, []string{"x", "y", long + "370900", long + "1146115"}
	ctx := context.Background()
	checkTable := func(seed uint64, step int, reg *registry) {
		t.Helper()
		reg.mu.RLock()
		defer reg.mu.RUnlock()
		for pub, tl := range reg.tools {
			v := reg.view.Tool(tl.Server, tl.Name)
			switch {
			case pub != tl.Public:
				t.Errorf("seed %d step %d: entry %s under %s", seed, step, tl.Public, pub)
			case !tl.removed && !reg.listed[tl.Server][tl.Name]:
				t.Errorf("seed %d step %d: %s not listed, and its entry keeps its definition", seed, step, pub)
			case tl.removed && (tl.InputSchema != nil || tl.OutputSchema != nil || tl.key != ""):
				t.Errorf("seed %d step %d: removed %s holds its definition (%s)", seed, step, pub, describe(tl))
			case tl.removed && v.State.Usable():
				t.Errorf("seed %d step %d: removed %s is %s", seed, step, pub, v.State)
			}
		}
		for _, ts := range reg.sorted {
			for _, tl := range ts {
				if tl.removed {
					t.Errorf("seed %d step %d: the suggestions' order holds removed %s", seed, step, tl.Public)
				}
			}
		}
	}
	e := &Executor{reg: newRegistry(testLogger(t))}
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 1))
		e.reg = newRegistry(testLogger(t))
		for step := range 40 {
			applyChurn(t, e.reg, removedChurn(rng, servers, names, step))
			checkTable(seed, step, e.reg)
			for _, s := range servers {
				for _, n := range names {
					pub := subjects.PublicName(s, n)
					start := e.reg.lookup(pub)
					if start == nil {
						continue
					}
					if v, tl, st := e.fresh(ctx, start); st == nil {
						if bad := usedAsDefinition(pub, v, tl); bad != "" {
							t.Fatalf("seed %d step %d: %s", seed, step, bad)
						}
					}
				}
			}
		}
	}

	// Concurrently: one tool removed and listed again (another definition each time), its
	// server removed and added again, while calls look it up and ask freshness.
	e.reg = newRegistry(testLogger(t))
	pub := subjects.PublicName("a", "x")
	var stop atomic.Bool
	var wg sync.WaitGroup
	var took, bad atomic.Int64
	var first atomic.Pointer[string]
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				start := e.reg.lookup(pub)
				if start == nil {
					continue
				}
				v, tl, st := e.fresh(ctx, start)
				if st != nil {
					continue
				}
				took.Add(1)
				if why := usedAsDefinition(pub, v, tl); why != "" {
					bad.Add(1)
					first.CompareAndSwap(nil, &why)
				}
			}
		})
	}
	at := time.Now().UTC()
	ready := &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "a", Status: subjects.StatusReady, At: at}
	gone := &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "a", Status: subjects.StatusRemoved, At: at}
	list := func(i int, with bool) *subjects.Snapshot {
		items := []json.RawMessage{json.RawMessage(`{"name":"other","inputSchema":{"type":"object"}}`)}
		if with {
			items = append(items, json.RawMessage(fmt.Sprintf(`{"name":"x","inputSchema":{"type":"object","properties":{"p%d":{}}},"outputSchema":{"type":"object"}}`, i)))
		}
		return &subjects.Snapshot{V: subjects.Version, Type: subjects.EventSnapshot, Server: "a", Kind: subjects.KindTools,
			Fingerprint: fmt.Sprint("f", i), ListedAt: at, Items: items}
	}
	for i := 0; i < 12_000 && bad.Load() == 0; i++ {
		switch i % 6 {
		case 0:
			applyTo(t, e.reg, ready, list(i, true))
		case 1:
			applyTo(t, e.reg, list(i, false))
		case 2:
			applyTo(t, e.reg, list(i, true))
		case 3:
			applyTo(t, e.reg, gone)
		case 4:
			applyTo(t, e.reg, list(i, false)) // the retraction that follows a removal
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d calls let through went on with an entry that is not the tool's listed definition; first: %s", n, took.Load(), *first.Load())
	}
	if took.Load() == 0 {
		t.Fatalf("no call was let through")
	}
	t.Logf("%d calls let through", took.Load())
}
