package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// An executor dies after dispatching a side-effecting call; the executor that takes the
// redelivered call refuses it before dispatch (a policy that now forbids the tool; a revocation
// or a rate limit alike). The call was dispatched: its answer is outcome_unknown, not a refusal
// saying that nothing ran (its caller would run it again under a new id).
func TestCrashAfterDispatchThenRefused(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	fast := Config{AckWait: time.Second, MaxDeliver: 5}
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

	done := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: "ticketing__createIssue", Principal: subjects.Principal{User: "local"},
			Arguments: json.RawMessage(`{"title":"Once only","body":"","priority":"high"}`)})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	select {
	case <-crash.dispatched:
	case res := <-done:
		t.Fatalf("answered before executor A dispatched: %s %+v", res.Status, res.Error)
	case <-time.After(waitLimit):
		t.Fatal("executor A never dispatched")
	}

	forbid, err := policy.New(&policy.Config{Rules: []policy.Rule{{Name: "no-create", Allow: []string{"*"}, Deny: []string{"ticketing__createIssue"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b := r.managerConfig(fast)
	b.FrontEnd = new(bool)
	b.Policy = forbid
	r.startExecutor(b, r.env.Connect(t))
	res := <-done
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Fatalf("got %s %+v, want failed outcome_unknown (the call was dispatched)", res.Status, res.Error)
	}
	if got := r.ticketCount(); got != 1 {
		t.Errorf("got %d tickets, want 1", got)
	}
}
