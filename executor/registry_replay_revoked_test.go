package executor

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// An executor that drops its registry view to replay the stream (purged: see registry.follow)
// holds, while the replay runs, the stream's first events without the later ones: a tool
// listed, then revoked, was fresh again between its snapshot and its revocation, and a call
// taken then ran it (a revoked tool executed). Calls wait for the replay to catch up with the
// stream as it was when the view was dropped; the revoked tool is then refused stale.
func TestRegistryReplayDoesNotRunRevokedTool(t *testing.T) {
	p := newReplayPause(t)
	disp := &countDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, hooks: p.hooks()}})
	p.resumeAtCleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	first, snap := publishVaultMove(r, `"readOnlyHint":true`)
	// The snapshot's application once armed is the replay's: it stops there, before the
	// revocation, until the test resumes it.
	p.at.Store(snap)
	r.publishRegistry(subjects.RegistryRevoked("vault"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "vault", Tools: []string{"move"}, Reason: "incident"})
	waitFor(t, "revoked in the executor's view", func() bool { return r.ex.reg.view.Tool("vault", "move").State == staleness.Revoked })

	// Purged up to vault's status: the executor no longer finds the first event it applied,
	// and replays the stream from vault's status on.
	p.replayFrom(ctx, t, r, first)

	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "mid-replay", Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	waitFor(t, "the call to run or wait for the replay", func() bool {
		select {
		case <-p.waiting:
			return true
		default:
			return disp.n.Load() > 0
		}
	})
	p.resumeReplay()
	res := <-done
	if n := disp.n.Load(); n != 0 {
		t.Errorf("the revoked tool was dispatched %d times during the replay: want never", n)
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Errorf("answer %s %+v, want refused stale (revoked)", res.Status, res.Error)
	}
}
