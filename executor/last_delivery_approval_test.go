package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestLastDeliveryWhileCopyWaitsForApproval: an executor's heartbeats are lost past AckWait
// while its call waits for approval, and the call's last delivery (MaxDeliver) reaches another
// executor, which answers it internal, "not run again", and stores that as the call's answer.
// The first copy still waited: approved, it ran the tool (it had looked for an answer before
// its wait, not after), and its result was refused by the results stream. The side effect
// happened and the call's one answer said it would not. The last delivery's refusal now takes
// the call's claim, as a dispatch does: the copy approved later finds it and does not run.
// Nor does a read-only tool's (approval-gated by configuration: a copy that ran it gave the
// caller "not run again").
func TestLastDeliveryWhileCopyWaitsForApproval(t *testing.T) {
	for _, tc := range []struct{ tool, args string }{
		{"ticketing__createIssue", `{"title":"Once","body":"b","priority":"low"}`},
		{"ticketing__listIssues", `{}`},
	} {
		t.Run(tc.tool, func(t *testing.T) { lastDeliveryWhileCopyWaits(t, tc.tool, tc.args) })
	}
}

func lastDeliveryWhileCopyWaits(t *testing.T, tool, args string) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	base := Config{AckWait: time.Second, MaxDeliver: 2, Approve: []string{tool}, Dispatcher: r.mgr, Relister: r.mgr}
	front := base
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A reaches NATS through a proxy that loses its progress heartbeats.
	px, nc := connectLosingHeartbeats(t, r)
	ca := base
	ca.Workers, ca.FrontEnd = 1, new(bool)
	a := r.startExecutor(ca, nc)
	r.waitTool(tool)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "last-while-waiting", Tool: tool, Arguments: json.RawMessage(args)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval on A", func() bool { return r.approvalWaits(req.ID) == 1 })

	// Executor B takes the call's last delivery after AckWait and answers it.
	cb := base
	cb.Workers, cb.FrontEnd = 1, new(bool)
	r.startExecutor(cb, r.env.Connect(t))
	first, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	px.drop.Store(false)

	// A's copy, still waiting, is approved.
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: req.ID, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve A's copy: %+v %v", rep, err)
	}
	waitFor(t, "A done with its copy", func() bool {
		a.flight.mu.Lock()
		defer a.flight.mu.Unlock()
		return len(a.flight.items) == 0
	})

	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != first.Status {
		t.Errorf("the call's answer changed from %s to %s", first.Status, res.Status)
	}
	n := a.Stats().Dispatched // (B never dispatches: it answers the last delivery)
	switch {
	case n > 1:
		t.Errorf("dispatched %d times, want at most once", n)
	case n == 1 && res.Status != subjects.CallOK && (res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown):
		t.Errorf("the tool ran, but the call's answer is %s %+v (want its result or outcome_unknown)", res.Status, res.Error)
	}
	if tk := r.ticketCount(); int64(tk) > n {
		t.Errorf("%d tickets, %d dispatches", tk, n)
	}
}
