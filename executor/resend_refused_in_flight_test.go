package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestResendRefusedWhileFirstRuns: a resend of a call id once the calls stream's
// de-duplication window is past, while the first request's side-effecting dispatch still runs,
// that is refused before dispatch (its arguments no longer validate here; a rate limit, a
// policy change alike) must not become the call's answer. It was stored first, the first
// request's result was then refused by the results stream, and every caller was told the call
// was refused — nothing ran — while it had run (a caller that then retries with a new id runs
// it twice).
func TestResendRefusedWhileFirstRuns(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	r.startExecutor(Config{Dispatcher: hold, Relister: r.mgr}, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)

	req := subjects.CallRequest{ID: "long-refused", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	resend := req
	resend.Arguments = json.RawMessage(`{"title":5}`)
	answered := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.CallDirect(ctx, "local", resend)
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	time.Sleep(500 * time.Millisecond) // the resend is checked while the first runs
	hold.letGo()

	for _, who := range []string{"the resend's caller", "the results stream"} {
		var res subjects.CallResult
		var err error
		if who == "the resend's caller" {
			res = <-answered
		} else if res, err = r.client.Await(ctx, "local", req.ID); err != nil {
			t.Fatal(err)
		}
		if res.Status != subjects.CallOK {
			t.Errorf("%s: the call's answer is %s %+v, want the first request's ok (it ran)", who, res.Status, res.Error)
		}
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}
