package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestLastDeliveryOfResendWaitsForFirst: a resend of a call id once the calls stream's
// de-duplication window is past, while the first request still runs, waits for the first's
// answer — also when it is delivered again (its executor died while it waited). At its
// MaxDeliver-th delivery it found the claim and answered outcome_unknown at once: stored first,
// it became the call's answer, and the first request's real result (ok: the call ran, once)
// was refused by the results stream.
func TestLastDeliveryOfResendWaitsForFirst(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	fast := Config{AckWait: time.Second, MaxDeliver: 2, Workers: 1}
	hold := holdCreateIssue(t, r)
	x := fast
	x.Dispatcher, x.Relister = hold, r.mgr
	r.startExecutor(x, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)

	req := subjects.CallRequest{ID: "last-resend", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req) // executor X's one worker holds the first request
	time.Sleep(window + 200*time.Millisecond)

	// Executor Y takes the resend, which waits for the first request's answer; Y dies.
	ncY := r.env.Connect(t)
	y := fast
	y.Dispatcher, y.Relister = r.mgr, r.mgr
	y.FrontEnd = new(bool)
	ey := r.startExecutor(y, ncY)
	if _, dup, err := r.client.Submit(ctx, "local", req); err != nil || dup {
		t.Fatalf("resend: duplicate %v, %v (want a second request)", dup, err)
	}
	waitFor(t, "the resend taken by executor Y", func() bool { return ey.Stats().Handled >= 1 })
	time.Sleep(300 * time.Millisecond) // it waits for the first's answer
	ncY.Close()

	// Executor Z takes the resend's last delivery.
	z := fast
	z.Dispatcher, z.Relister = r.mgr, r.mgr
	z.FrontEnd = new(bool)
	ez := r.startExecutor(z, r.env.Connect(t))
	waitFor(t, "the resend delivered again to executor Z", func() bool { return ez.Stats().Handled >= 1 })
	time.Sleep(300 * time.Millisecond)
	hold.letGo()

	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the call's answer is %s %+v, want the first request's ok (it ran once)", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}
