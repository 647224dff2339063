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
	hold := &holdingDispatcher{inner: r.mgr, tool: "createIssue", held: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(hold.release)
		}
	}()
	ex := r.startExecutor(Config{Dispatcher: hold, Relister: r.mgr}, r.env.NC)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	s, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = window
	if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	req := subjects.CallRequest{ID: "long", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the first request was never dispatched")
	}
	time.Sleep(window + 200*time.Millisecond) // the calls stream forgets the id
	if _, dup, err := r.client.Submit(ctx, "local", req); err != nil || dup {
		t.Fatalf("resend: duplicate %v, %v (want a second request)", dup, err)
	}
	waitFor(t, "the resend taken by a worker", func() bool { return ex.Stats().Handled >= 2 })
	time.Sleep(300 * time.Millisecond) // the resend finds the claim
	close(hold.release)
	released = true

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
	waitFor(t, "both requests settled", func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}
