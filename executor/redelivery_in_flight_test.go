package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRedeliveryWhileFirstCopyRuns: an executor's progress heartbeats are lost (its NATS
// connection half-down: a network stall, a paused process) for longer than AckWait while it
// runs a side-effecting call, so JetStream delivers the call again — to another executor, or
// to another worker of the same one. The redelivery found its own request's claim and stored
// outcome_unknown at once; the first copy's real result (ok: the call ran, once) was then
// refused by the results stream, and the caller was told the outcome was unknown. The holder
// is alive: the redelivery waits for its answer, as a resend waits for another request's.
func TestRedeliveryWhileFirstCopyRuns(t *testing.T) {
	for _, where := range []string{"another executor", "the same executor"} {
		t.Run(where, func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
			hold := holdCreateIssue(t, r)
			base := Config{AckWait: time.Second, Dispatcher: hold, Relister: r.mgr}
			front := base
			front.NoWorkers = true
			r.startExecutor(front, r.env.NC)

			// Executor A reaches NATS through a proxy that loses its progress heartbeats.
			px, nc := connectLosingHeartbeats(t, r)
			ca := base
			ca.Workers, ca.FrontEnd = 1, new(bool)
			if where == "the same executor" {
				ca.Workers = 2
			}
			a := r.startExecutor(ca, nc)
			r.waitTool("ticketing__createIssue")

			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			req := subjects.CallRequest{ID: "redelivered", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
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

			// The call is delivered again after AckWait, while A's first copy still runs.
			again := a
			if where == "another executor" {
				cb := base
				cb.Workers, cb.FrontEnd = 1, new(bool)
				again = r.startExecutor(cb, r.env.Connect(t))
			}
			waitFor(t, "the call delivered again", func() bool {
				if where == "another executor" {
					return again.Stats().Handled >= 1
				}
				return a.Stats().Handled >= 2
			})
			// What the redelivery does now (it stored outcome_unknown at once) is done well
			// within this.
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
		})
	}
}

// TestRedeliveryOfDeadHolderLongCall: the executor that dispatched a side-effecting call with a
// long timeout dies (its connection closed) before recording the result. The redelivery knows
// the holder is gone (its discovery service has no responders) and answers outcome_unknown
// without waiting for the holder's deadline, an hour away.
func TestRedeliveryOfDeadHolderLongCall(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	fast := Config{AckWait: time.Second, MaxCallTimeout: 2 * time.Hour}
	front := fast
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	ncA := r.env.Connect(t)
	crash := &crashingDispatcher{inner: r.mgr, nc: ncA, dispatched: make(chan struct{}), release: make(chan struct{})}
	a := fast
	a.Dispatcher, a.Relister = crash, r.mgr
	a.FrontEnd = new(bool)
	r.startExecutor(a, ncA)
	t.Cleanup(func() { close(crash.release) })
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "dead-holder", Tool: "ticketing__createIssue", TimeoutMs: time.Hour.Milliseconds(),
		Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	select {
	case <-crash.dispatched:
	case <-ctx.Done():
		t.Fatal("executor A never dispatched")
	}
	b := r.managerConfig(fast)
	b.FrontEnd = new(bool)
	r.startExecutor(b, r.env.Connect(t))
	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatalf("no answer within %s (waiting for a dead holder's deadline?): %v", waitLimit, err)
	}
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

// TestRedeliveryAfterHolderLeft: the executor that dispatched a side-effecting call could not
// store its answer (its publishes to the results stream lost) and handed the call back; its
// process lives on and answers pings. The delivery that ended marked its claim left: the
// redelivery, on another executor, answers outcome_unknown at once rather than waiting for the
// holder's deadline (the call's timeout, here past the test's limit).
func TestRedeliveryAfterHolderLeft(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	base := Config{AckWait: time.Second, Dispatcher: hold, Relister: r.mgr, CallTimeout: 2 * waitLimit}
	front := base
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A's answers go to a subject no stream takes (no responders: storing fails at
	// once), and its pull requests are lost (so that the call handed back goes to executor B).
	px := startDropper(t, strings.TrimPrefix(r.env.URL, "nats://"), func(subject string, payload []byte) bool {
		return subject == callsPull
	})
	px.rename = func(subject string) (string, bool) {
		if strings.HasPrefix(subject, "mcpstream.v1.results.") {
			return "nowhere." + subject, true
		}
		return "", false
	}
	nc, err := nats.Connect("nats://"+px.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ca := base
	ca.Workers, ca.FrontEnd = 1, new(bool)
	r.startExecutor(ca, nc)
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "left", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)
	px.drop.Store(true)
	cb := base
	cb.Workers, cb.FrontEnd = 1, new(bool)
	r.startExecutor(cb, r.env.Connect(t))
	hold.letGo()

	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatalf("no answer within %s (waiting for the deadline of a holder that left?): %v", waitLimit, err)
	}
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

// TestResendWhileHolderStops: the executor running a side-effecting call is told to stop; it
// lets the call finish (StopGrace) and stores its answer. A resend of the call id once the
// calls stream's de-duplication window is past, taken meanwhile by another executor, waits for
// that answer. The stopping executor stopped its discovery service first: the resend's ping
// found no responders, took the holder for gone and stored outcome_unknown, and the call's real
// result (it ran, once) was refused.
func TestResendWhileHolderStops(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)

	ca := Config{Dispatcher: hold, Relister: r.mgr, Workers: 1, FrontEnd: new(bool), StopGrace: waitLimit}
	ca.Log = testLogger(t).With().Str("role", "executor A").Logger()
	a, err := New(r.env.Connect(t), ca)
	if err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	t.Cleanup(func() {
		stopA()
		hold.letGo()
		select {
		case <-aDone:
		case <-time.After(waitLimit):
			t.Errorf("executor A did not stop")
		}
	})
	waitFor(t, "executor A ready with the tool", func() bool { return a.Ready() && a.reg.lookup("ticketing__createIssue") != nil })

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r.shortenDedup(ctx, time.Second, subjects.CallsStream)
	req := subjects.CallRequest{ID: "holder-stops", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)

	cb := Config{Dispatcher: hold, Relister: r.mgr, Workers: 1, FrontEnd: new(bool)}
	b := r.startExecutor(cb, r.env.Connect(t))
	r.waitTool("ticketing__createIssue")

	stopA() // A stops: its worker still runs the call, within StopGrace
	waitFor(t, "executor A stopping", func() bool { return !a.Ready() })
	waitFor(t, "the resend past the de-duplication window", func() bool {
		_, dup, err := r.client.Submit(ctx, "local", req)
		return err == nil && !dup
	})
	waitFor(t, "the resend taken by executor B", func() bool { return b.Stats().Handled >= 1 })
	// What the resend does now (it stored outcome_unknown at once) is done well within this.
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	early, err := r.client.Await(wctx, "local", req.ID)
	wcancel()
	if err == nil {
		t.Errorf("answered %s %+v while the holder still runs", early.Status, early.Error)
	}
	hold.letGo()

	res, err := r.client.Await(ctx, "local", req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Errorf("the call's answer is %s %+v, want the first request's ok", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

// TestClaimsNameOnlyAPingableInstance: an executor whose discovery service never answers (its
// NATS user may not subscribe to $SRV.>: micro keeps the service, only reporting the error)
// would name in its claims an instance whose pings get no responders while it lives, and a
// request waiting on such a claim would take the holder for gone (outcome_unknown while the
// call runs). Claims name the instance only once it answers its own ping.
func TestClaimsNameOnlyAPingableInstance(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	px := startDropper(t, strings.TrimPrefix(r.env.URL, "nats://"), func(string, []byte) bool { return false })
	px.dropSub = func(subject string) bool { return strings.HasPrefix(subject, "$SRV.") }
	px.drop.Store(true)
	nc, err := nats.Connect("nats://" + px.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	deaf := r.startExecutor(Config{Dispatcher: r.mgr, Relister: r.mgr}, nc)
	heard := r.startExecutor(Config{Dispatcher: r.mgr, Relister: r.mgr, FrontEnd: new(bool)}, r.env.Connect(t))
	waitFor(t, "both executors ready", func() bool { return deaf.Ready() && heard.Ready() })
	if px.dropped.Load() == 0 {
		t.Fatal("the proxy lost no $SRV subscription: the test does not test")
	}
	if id := deaf.instance.Load(); id != nil {
		t.Errorf("an executor whose service does not answer names instance %q in its claims", *id)
	}
	if heard.instance.Load() == nil {
		t.Error("an executor whose service answers names no instance in its claims")
	}
}
