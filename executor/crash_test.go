package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// crashingDispatcher runs the real dispatch, then kills its executor before the result can be
// recorded: it closes the executor's NATS connection and blocks until released.
type crashingDispatcher struct {
	inner      Dispatcher
	nc         *nats.Conn
	dispatched chan struct{}
	release    chan struct{}
	once       sync.Once
}

func (d *crashingDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	rep := d.inner.Dispatch(ctx, server, req)
	d.once.Do(func() {
		d.nc.Close()
		close(d.dispatched)
	})
	<-d.release
	return rep
}

// An executor dies after dispatching a side-effecting call and before recording its result:
// another executor answers outcome_unknown and never runs the call again.
func TestCrashAfterDispatch(t *testing.T) {
	cases := []struct {
		name    string
		tool    string
		args    string
		tickets int    // tickets after the call
		status  string // of the answer
		code    string
	}{
		// createIssue is neither read-only nor idempotent: claimed, never run twice.
		{name: "side effect", tool: "ticketing__createIssue", args: `{"title":"Once only","body":"","priority":"high"}`,
			tickets: 1, status: subjects.CallFailed, code: subjects.CodeOutcomeUnknown},
		// listIssues is read-only: the second executor simply runs it.
		{name: "read-only", tool: "ticketing__listIssues", args: `{}`, tickets: 0, status: subjects.CallOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
			fast := Config{AckWait: time.Second, MaxDeliver: 5}

			// A front end only, on the test's connection: the caller waits here.
			front := fast
			front.NoWorkers = true
			r.startExecutor(front, r.env.NC)

			// Executor A: the only worker at first; it dies right after dispatch.
			ncA := r.env.Connect(t)
			crash := &crashingDispatcher{inner: r.mgr, nc: ncA, dispatched: make(chan struct{}), release: make(chan struct{})}
			a := fast
			a.Dispatcher, a.Relister = crash, r.mgr
			a.FrontEnd = new(bool)
			r.startExecutor(a, ncA)
			t.Cleanup(func() { close(crash.release) }) // runs before A's stop
			r.waitTool(tc.tool)

			done := make(chan subjects.CallResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: tc.tool, Arguments: json.RawMessage(tc.args)})
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

			// Executor B takes the redelivered call after A's AckWait.
			b := r.managerConfig(fast)
			b.FrontEnd = new(bool)
			r.startExecutor(b, r.env.Connect(t))
			res := <-done
			if res.Status != tc.status || (res.Error == nil) != (tc.code == "") || res.Error != nil && res.Error.Code != tc.code {
				t.Fatalf("got %s %+v, want %s %s", res.Status, res.Error, tc.status, tc.code)
			}
			if got := r.ticketCount(); got != tc.tickets {
				t.Errorf("got %d tickets, want %d", got, tc.tickets)
			}
		})
	}
}
