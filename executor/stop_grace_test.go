package executor

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// stopGraceLong is a StopGrace far past every wait of these tests: an executor whose Run
// returns within a test's wait did not wait for its grace to end.
const stopGraceLong = 10 * time.Minute

// runExecutor starts an executor on its own connection with cfg (StopGrace stopGraceLong) and
// returns it, its stop and the channel Run's error comes on.
func runExecutor(t *testing.T, r *rig, cfg Config) (*Executor, context.CancelFunc, chan error) {
	t.Helper()
	cfg.StopGrace = stopGraceLong
	cfg.Log = testLogger(t).With().Str("role", "executor").Logger()
	ex, err := New(r.env.Connect(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(stop)
	waitFor(t, "executor ready with the tool", func() bool {
		return ex.Ready() && ex.reg.lookup("ticketing__createIssue") != nil
	})
	return ex, stop, done
}

// waitRunReturns fails the test unless Run returns within 2 × waitLimit (far within StopGrace).
func waitRunReturns(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("executor Run: %v", err)
		}
	case <-time.After(2 * waitLimit):
		t.Fatalf("Run did not return within %s of its stop (StopGrace %s): it waits for its grace", 2*waitLimit, stopGraceLong)
	}
}

// TestStopIdleReturnsBeforeGrace: an executor with no call in flight returns from Run once
// stopped, without waiting for StopGrace.
func TestStopIdleReturnsBeforeGrace(t *testing.T) {
	for _, workers := range []int{1, 0} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
			_, stop, done := runExecutor(t, r, Config{Dispatcher: r.mgr, Relister: r.mgr, Workers: workers})
			stop()
			waitRunReturns(t, done)
		})
	}
}

// TestStopInFlightReturnsOnceAnswered: an executor stopped while one of its workers runs a call
// lets the call finish and stores its answer, then returns from Run: it does not wait for the
// rest of StopGrace once its calls are done.
func TestStopInFlightReturnsOnceAnswered(t *testing.T) {
	for _, workers := range []int{1, 0} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
			hold := holdCreateIssue(t, r)
			ex, stop, done := runExecutor(t, r, Config{Dispatcher: hold, Relister: r.mgr, Workers: workers})

			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			req := subjects.CallRequest{ID: "in-flight", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
			r.submitHeld(ctx, hold, req)
			stop()
			waitFor(t, "executor stopping", func() bool { return !ex.Ready() })
			hold.letGo()

			res, err := r.client.Await(ctx, "local", req.ID)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != subjects.CallOK {
				t.Errorf("the call's answer is %s %+v, want ok", res.Status, res.Error)
			}
			waitRunReturns(t, done)
			if n := r.ticketCount(); n != 1 {
				t.Errorf("%d tickets, want 1", n)
			}
		})
	}
}
