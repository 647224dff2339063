package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// countDispatcher answers every call ok and counts them.
type countDispatcher struct{ n atomic.Int32 }

func (d *countDispatcher) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	d.n.Add(1)
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

// An approved call that waits for a concurrency slot while its tool is re-listed with another
// definition (another inputSchema, which its arguments no longer satisfy) is not dispatched
// under the definition it was approved and validated against: the first attempt is held to
// what admission checked, as a retry is. It was sent, the server running a tool nobody
// approved nor validated the arguments for.
func TestRelistedWhileWaitingForSlotNotDispatched(t *testing.T) {
	disp := &countDispatcher{}
	limits := Limits{Tools: map[string]Rate{"vault__move": {Concurrency: 1}}}
	busy := make(chan string, 1)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(r.managerConfig(Config{Dispatcher: disp, Limits: limits, hooks: testHooks{slotBusy: func(id string) {
		select {
		case busy <- id:
		default:
		}
	}}}), r.env.NC)
	snap := func(fp, move string) {
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Items: []json.RawMessage{json.RawMessage(move)}})
	}
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	snap("f1", `{"name":"move","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`)
	r.waitTool("vault__move")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, "vault__move", Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}

	done := r.approvalCall(ctx, "relisted", "vault__move")
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "relisted", Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-busy:
	case res := <-done:
		t.Fatalf("answered before waiting for the slot: %s %+v", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the approved call neither waited for a slot nor was answered")
	}
	// Re-listed while the call waits: move now requires a path, which the call does not give.
	snap("f2", `{"name":"move","inputSchema":{"type":"object","required":["path"]},"annotations":{"destructiveHint":true}}`)
	waitFor(t, "the new definition in the executor's table", func() bool {
		tl := r.ex.reg.lookup("vault__move")
		return tl != nil && tl.Fingerprint == "f2"
	})
	held.release(ctx)
	res := <-done
	if n := disp.n.Load(); n != 0 {
		t.Errorf("dispatched %d times under the definition it was approved for, though re-listed otherwise since: want none", n)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Errorf("answer %s %+v, want refused stale (nothing sent)", res.Status, res.Error)
	}
}
