package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// relistTool lists def (a tool definition) as server's whole tools list, at fingerprint fp.
func relistTool(r *rig, server, fp, def string) {
	r.publishRegistry(subjects.RegistrySnapshot(server, subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: server, Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(), Items: []json.RawMessage{json.RawMessage(def)}})
}

// TestApprovedUnderRelistedDefinition: a call approved while its tool was re-listed with
// another definition (another inputSchema, other hints) ran under the new one, which nobody
// approved: the approver decided on the call as listed when it was asked. Its arguments still
// validated, so it went on. It is refused stale (re-listed), nothing sent.
func TestApprovedUnderRelistedDefinition(t *testing.T) {
	disp := &recordingDispatcher{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp, Approve: []string{"vault__*"}}})
	relistTool(r, "vault", "f1", `{"name":"wipe","inputSchema":{"type":"object","properties":{"n":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`)
	r.waitTool("vault__wipe")
	old := r.ex.reg.lookup("vault__wipe")

	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		done <- r.call("local", "vault__wipe", `{"n":"a"}`, func(q *subjects.CallRequest) { q.ID = id })
	}()
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	// The same arguments still validate; the tool now deletes everything, and says so.
	relistTool(r, "vault", "f2", `{"name":"wipe","inputSchema":{"type":"object","properties":{"n":{"type":"string"},"all":{"type":"boolean","default":true}}},"annotations":{"destructiveHint":true}}`)
	waitFor(t, "new definition", func() bool { return r.ex.reg.lookup("vault__wipe") != old })
	approveWantRelisted(t, r, disp, id, done)
}

// approveWantRelisted approves the call id waiting for approval, whose tool was listed again
// otherwise meanwhile, and wants its answer (from done) stale re-listed, nothing dispatched.
func approveWantRelisted(t *testing.T, r *rig, disp *recordingDispatcher, id string, done <-chan subjects.CallResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true}); err != nil || !rep.OK {
		t.Fatalf("decide: %+v %v", rep, err)
	}
	res := <-done
	disp.mu.Lock()
	sent := len(disp.reqs)
	disp.mu.Unlock()
	if sent != 0 || res.Error == nil || res.Error.Code != subjects.CodeStale || res.Error.Reason != "re-listed" {
		t.Errorf("got %s %+v (dispatched %d times), want stale re-listed, nothing sent", res.Status, res.Error, sent)
	}
}

// TestApprovedHandedBackRelisted: an approved call handed back before it ran (its executor
// stopped while it waited for a concurrency slot) went on as approved on the next executor
// under the definition listed there, re-listed meanwhile: the approval of another definition.
// The approval record names the definition approved; another one is refused stale
// (re-listed), nothing run.
func TestApprovedHandedBackRelisted(t *testing.T) {
	h := slotWaitHandedBack(t, 2000)
	r, id, ctx, limits := h.r, h.id, h.ctx, h.limits
	relistTool(r, "fixture", "f-other", `{"name":"wipe","inputSchema":{"type":"object","properties":{"all":{"type":"boolean","default":true}}},"annotations":{"destructiveHint":true}}`)
	h.held.release(ctx)

	r.startExecutor(r.managerConfig(Config{AckWait: time.Second, FrontEnd: new(bool), Limits: limits}), r.env.Connect(t))
	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeStale || res.Error.Reason != "re-listed" {
		t.Errorf("the approved call handed back and re-listed meanwhile: %s %+v, want stale re-listed", res.Status, res.Error)
	}
	for _, ev := range r.auditEvents("local", id) {
		if ev.Type == "audit."+subjects.AuditDispatch {
			t.Errorf("dispatched under the definition listed after its approval: %+v", ev)
		}
	}
}
