package executor

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A call approved while its executor replays the purged registry stream (registry.follow) waits
// for the replay, as a call admitted then does, before the view is read again: it was refused
// from the view part way through, not_found (its server's status replayed, not yet its list),
// the approver's OK thrown away.
func TestApprovedDuringReplayWaitsForIt(t *testing.T) {
	p := newReplayPause(t)
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, hooks: p.hooks()}})
	p.resumeAtCleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	first, _ := publishVaultMove(r, `"destructiveHint":true`)
	p.at.Store(first) // the replay stops at vault's status, before its list
	r.waitTool("vault__move")

	done := r.approvalCall(ctx, "approved-mid-replay", "vault__move")
	p.replayFrom(ctx, t, r, first)
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: "approved-mid-replay", Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-p.waiting:
	case res := <-done:
		t.Fatalf("answered from the view part way through its replay: %s %+v, want it to wait for the replay", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the approved call neither waited for the replay nor was answered")
	}
	p.resumeReplay()
	res := <-done
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once", res.Status, res.Error, disp.n.Load())
	}
}
