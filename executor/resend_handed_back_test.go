package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestResendHandedBackWhileFirstRuns: a resend past the calls stream's de-duplication window
// waits for the answer of the first request, which still runs. When the executor holding the
// resend stops, the resend is handed back (nak) and delivered again, to another executor: that
// delivery (NumDelivered 2) was taken for a redelivery of the request that holds the claim
// (its worker died) and stored outcome_unknown at once. The first request's real result was
// then dropped: the call ran, and every caller was told its outcome was unknown.
func TestResendHandedBackWhileFirstRuns(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	cfg := Config{Dispatcher: hold, Relister: r.mgr, Workers: 1}
	r.startExecutor(cfg, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)

	req := subjects.CallRequest{ID: "long", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)

	// A second executor, whose one worker takes the resend (the first's is busy) and stops.
	b, err := New(r.env.Connect(t), Config{Dispatcher: hold, Relister: r.mgr, Workers: 1, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bstop := context.WithCancel(context.Background())
	bdone := make(chan error, 1)
	go func() { bdone <- b.Run(bctx) }()
	defer func() {
		bstop()
		<-bdone
	}()
	waitFor(t, "second executor ready", b.Ready)

	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	if _, dup, err := r.client.Submit(ctx, "local", req); err != nil || dup {
		t.Fatalf("resend: duplicate %v, %v (want a second request)", dup, err)
	}
	waitFor(t, "the resend taken by the second executor", func() bool { return b.Stats().Handled >= 1 })
	time.Sleep(300 * time.Millisecond) // the resend finds the claim and waits
	bstop()
	if err := <-bdone; err != nil {
		t.Errorf("second executor: %v", err)
	}
	bdone <- nil // (for the deferred stop)

	// A third executor takes the resend handed back.
	c := r.startExecutor(cfg, r.env.Connect(t))
	waitFor(t, "the resend delivered again", func() bool { return c.Stats().Handled >= 1 })
	time.Sleep(300 * time.Millisecond)
	hold.letGo()

	res, err := r.client.Await(ctx, "local", "long")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the call's answer is %s %+v, want the first request's ok", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	r.waitCallsSettled(ctx)
}
