package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// hookDispatcher runs first at its first dispatch and answers it "unavailable" (nothing was
// sent); later dispatches answer ok.
type hookDispatcher struct {
	first func()
	mu    sync.Mutex
	n     int
}

func (d *hookDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	if n == 1 {
		d.first()
		return subjects.DispatchReply{V: 1, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "not connected; nothing was sent"}}
	}
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

// dispatches is how many times Dispatch ran.
func (d *hookDispatcher) dispatches() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// A tool removed from its server's list while its call waits to be retried is not dispatched
// again, even once the view no longer remembers the removal (a large list removed after it:
// the removal falls back to "unknown", which admission refuses as well).
func TestRetryAfterRemovalForgottenNotDispatched(t *testing.T) {
	disp := &hookDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp}})
	snap := func(fp string, items ...json.RawMessage) {
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Items: items})
	}
	move := json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)
	disp.first = func() {
		// The server drops move with every other tool; then lists again.
		snap("f2")
		snap("f3", json.RawMessage(`{"name":"other","inputSchema":{"type":"object"}}`))
		waitFor(t, "the list applied", func() bool {
			return r.ex.reg.view.Tool("vault", "other").State == staleness.Fresh
		})
		if st := r.ex.reg.view.Tool("vault", "move").State; st != staleness.Unknown {
			t.Errorf("view: move is %s, want unknown (its removal forgotten)", st)
		}
	}
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	items := []json.RawMessage{move}
	for i := range staleness.MaxRemembered {
		items = append(items, json.RawMessage(fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i)))
	}
	snap("f1", items...)
	r.waitTool("vault__move")

	res := r.call("local", "vault__move", `{}`)
	n := disp.dispatches()
	if n != 1 || res.Status == subjects.CallOK {
		t.Errorf("dispatched %d times, answer %s %+v: want one dispatch and no ok after the removal", n, res.Status, res.Error)
	}
}
