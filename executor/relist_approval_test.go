package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// recordingDispatcher answers every call ok and records what it was asked.
type recordingDispatcher struct {
	mu   sync.Mutex
	reqs []subjects.DispatchRequest
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.mu.Lock()
	d.reqs = append(d.reqs, req)
	d.mu.Unlock()
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

// TestRelistDuringApproval: a tool re-listed with another definition while its call waits for
// approval is not dispatched. It used to keep the old one: fresh() looked the tool up again
// only after a ttl re-list, so the new schema was not applied and the old annotations
// (read-only: no claim) decided how the call was dispatched. The call was then checked against
// the new definition and ran under it when it passed, approved under another: it is refused
// stale (re-listed), nothing sent (see TestApprovedUnderRelistedDefinition).
func TestRelistDuringApproval(t *testing.T) {
	disp := &recordingDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, Approve: []string{"vault__*"}}})
	snap := func(fp, def string) {
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Items: []json.RawMessage{json.RawMessage(def)}})
	}
	snap("f1", `{"name":"move","inputSchema":{"type":"object","properties":{"n":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`)
	r.waitTool("vault__move")
	old := r.ex.reg.lookup("vault__move")

	id := "relist-1"
	done := make(chan subjects.CallResult, 1)
	go func() {
		done <- r.call("local", "vault__move", `{"n":"abc"}`, func(q *subjects.CallRequest) { q.ID = id })
	}()
	waitFor(t, "needs_approval", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	// Now: n must be an integer, and the tool has side effects (no hints).
	snap("f2", `{"name":"move","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}`)
	waitFor(t, "new definition", func() bool { return r.ex.reg.lookup("vault__move") != old })
	approveWantRelisted(t, r, disp, id, done)
}
