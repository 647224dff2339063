package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestResendRelayedWhileFirstRuns: a call id resent once the calls stream's de-duplication
// window is past, while its first request still runs, by a caller the front end answers (its
// reply subject is not under the reply prefixes), gets the first request's answer marked
// duplicate, as every other resend. The front end relayed the first request's answer as it saw
// it published on the results subject (stored, so taken for this request's own), not marked
// duplicate: the caller was told its request ran the call.
func TestResendRelayedWhileFirstRuns(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	ex := r.startExecutor(Config{Dispatcher: hold, Relister: r.mgr}, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)

	req := subjects.CallRequest{ID: "relayed-long", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id

	nc, err := nats.Connect(r.env.NC.ConnectedUrl(), nats.CustomInboxPrefix("_CUSTOM.inbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	relayed := Client{NC: nc}
	answered := make(chan subjects.CallResult, 1)
	go func() {
		res, err := relayed.Call(ctx, "local", req)
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	waitFor(t, "the resend taken by a worker", func() bool { return ex.Stats().Handled >= 2 })
	time.Sleep(300 * time.Millisecond) // the resend finds the claim
	hold.letGo()

	res := <-answered
	if res.Status != subjects.CallOK || !res.Duplicate {
		t.Errorf("the resend got %s %+v (duplicate %v), want the first request's ok, duplicate", res.Status, res.Error, res.Duplicate)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	r.waitCallsSettled(ctx)
}
