package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRedeliveryWaitsForHolderWithClockBehind: the claim of a side-effecting call says until
// when its holder's answer may come (Until) on the holder's host clock, and a delivery of the
// call on another executor compared it with its own. A holder whose clock is 10 minutes behind
// (NTP drift, a VM resumed) wrote an Until already 9 minutes past on the other host's clock: a
// redelivery there (the holder's progress heartbeats lost past AckWait while the call still
// runs) stopped waiting at once and stored outcome_unknown, the holder's real result (ok: the
// call ran, once) was refused, and the caller was told the outcome was unknown. The wait now
// runs on the NATS server's clock: from the claim's stored timestamp, the holder's budget
// (Until less At, one host's clock), whatever either host's clock says.
func TestRedeliveryWaitsForHolderWithClockBehind(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	base := Config{AckWait: time.Second, Dispatcher: hold, Relister: r.mgr}
	front := base
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A, on a host 10 minutes behind, reaches NATS through a proxy that loses its
	// progress heartbeats.
	px, nc := connectLosingHeartbeats(t, r)
	ca := base
	ca.Workers, ca.FrontEnd = 1, new(bool)
	ca.hooks.hostClock = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	r.startExecutor(ca, nc)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "holder-behind", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", req)
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the call was never dispatched")
	}

	// The call is delivered again after AckWait to executor B (a right clock), while A's copy
	// still runs.
	cb := base
	cb.Workers, cb.FrontEnd = 1, new(bool)
	b := r.startExecutor(cb, r.env.Connect(t))
	waitFor(t, "the call delivered again", func() bool { return b.Stats().Handled >= 1 })
	// What the redelivery did (it stored outcome_unknown at once) is done well within this.
	time.Sleep(500 * time.Millisecond)
	px.drop.Store(false)
	hold.letGo()

	var res subjects.CallResult
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("no answer")
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the caller's answer is %s %+v, want ok: the call ran once", res.Status, res.Error)
	}
	stored, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != subjects.CallOK {
		t.Errorf("the stored answer is %s %+v, want ok", stored.Status, stored.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	r.waitCallsSettled(ctx)
}
