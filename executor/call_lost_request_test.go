package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallLostRequest: Call's request to the front end is a core NATS message: lost on its way
// (a cluster node dying with it in its buffers, TestClusterNodeFailover: "call fo-0-4 … no
// answer after 30.007s", no audit event, no stored result), nothing is stored and nobody ever
// answers — Call polled the results stream until its deadline for an answer that could not
// come. With JS, a Call unanswered within PubAckWait publishes the same request straight on
// the calls stream under the same Nats-Msg-Id (as CallDirect does): it runs once and is
// answered before the caller's deadline.
func TestCallLostRequest(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{})
	// The proxy loses the client's first publish to the exec subject, and only it: the
	// connection stays up, the server never sees that message, nobody says "no responders".
	var first atomic.Bool
	p := startDropper(t, r.env.Server.Inner().Addr().String(), func(subject string, _ []byte) bool {
		return subject == subjects.Exec("local") && first.CompareAndSwap(false, true)
	})
	c := clientVia(t, p, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.Call(ctx, "local", subjects.CallRequest{ID: "lost-exec", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if p.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped %d publishes, want 1 (the test did not test it)", p.dropped.Load())
	}
	if err != nil {
		t.Fatalf("Call after a lost request: %v", err)
	}
	if res.Status != subjects.CallOK || res.Error != nil || res.Duplicate {
		t.Errorf("answer %s %+v (duplicate %v), want ok, not a duplicate", res.Status, res.Error, res.Duplicate)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

// TestCallNoExecutorWithJS: a Call made while no executor runs fails fast with ErrNoExecutor
// also with JS set (the resend of a lost request is for requests nobody answered, not for
// those the server said nobody could take), and nothing is stored on the calls stream.
func TestCallNoExecutorWithJS(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	c := Client{NC: r.env.NC, JS: r.env.JS, PubAckWait: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := c.Call(ctx, "local", subjects.CallRequest{ID: "no-executor", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"t","body":"b","priority":"low"}`)})
	if !errors.Is(err, ErrNoExecutor) {
		t.Fatalf("Call with no executor: %v, want ErrNoExecutor", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Call with no executor waited until its deadline")
	}
	calls, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return // nothing stored
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := calls.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d requests stored on the calls stream after ErrNoExecutor, want 0", info.State.Msgs)
	}
}

// TestCallResentInFlight: a Call whose answer takes longer than PubAckWait publishes its
// request on the calls stream again while the first one runs; the PubAck says Duplicate (its
// own first request), the resends stop, and the answer is the call's own: ok, not a duplicate.
func TestCallResentInFlight(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	c := Client{NC: r.env.NC, JS: r.env.JS, PubAckWait: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.Call(ctx, "local", subjects.CallRequest{ID: "resent-in-flight", Tool: "fixture__slow",
		Arguments: json.RawMessage(`{"ms":1500}`), Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if res.Status != subjects.CallOK || res.Error != nil || res.Duplicate {
		t.Errorf("answer %s %+v (duplicate %v), want ok, not a duplicate", res.Status, res.Error, res.Duplicate)
	}
	if res.Attempts != 1 {
		t.Errorf("%d attempts, want 1", res.Attempts)
	}
}
