package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// holdingDispatcher holds the dispatches of one tool until released.
type holdingDispatcher struct {
	inner   Dispatcher
	tool    string
	held    chan struct{} // closed at the first held dispatch
	release chan struct{}
	once    sync.Once
	letOnce sync.Once
}

// holdCreateIssue returns a holdingDispatcher of ticketing's createIssue over r's connector,
// released at cleanup if the test did not (letGo).
func holdCreateIssue(t *testing.T, r *rig) *holdingDispatcher {
	d := &holdingDispatcher{inner: r.mgr, tool: "createIssue", held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(d.letGo)
	return d
}

// letGo releases the held dispatches (once).
func (d *holdingDispatcher) letGo() { d.letOnce.Do(func() { close(d.release) }) }

// submitHeld submits req and waits until its first request's dispatch is held.
func (r *rig) submitHeld(ctx context.Context, d *holdingDispatcher, req subjects.CallRequest) {
	r.t.Helper()
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-d.held:
	case <-ctx.Done():
		r.t.Fatal("the first request was never dispatched")
	}
}

func (d *holdingDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	if req.Tool == d.tool {
		d.once.Do(func() { close(d.held) })
		select {
		case <-d.release:
		case <-ctx.Done():
		}
	}
	return d.inner.Dispatch(ctx, server, req)
}

// TestResendPastWindowWhileFirstRuns: a call id resent once the calls stream's de-duplication
// window is past, while its first request still runs (a long call or a long approval wait: a
// request's timeoutMs and approvalTimeoutMs may exceed the 10-minute window), is a second
// request of the same call: it must not run (the claim holds) and its answer is the first's. It
// found the claim without an answer and stored outcome_unknown at once, "never recorded"; the
// first request's real result was then dropped as a duplicate, so the call ran and every caller,
// and the results stream, said its outcome was unknown.
func TestResendPastWindowWhileFirstRuns(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	ex := r.startExecutor(Config{Dispatcher: hold, Relister: r.mgr}, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream)

	req := subjects.CallRequest{ID: "long", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	if _, dup, err := r.client.Submit(ctx, "local", req); err != nil || dup {
		t.Fatalf("resend: duplicate %v, %v (want a second request)", dup, err)
	}
	waitFor(t, "the resend taken by a worker", func() bool { return ex.Stats().Handled >= 2 })
	time.Sleep(300 * time.Millisecond) // the resend finds the claim
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
