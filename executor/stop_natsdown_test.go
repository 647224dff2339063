package executor

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// lockedLog is a log sink safe for the executor's goroutines and the test's.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStopIdleWithNATSDown: an executor with no call in flight whose NATS server went away (its
// connection reconnecting) returns from Run once stopped, without waiting for the server to
// confirm its calls consumer's drain: before a flush sent on its connection just before it was
// stopped fails (nats.go's 10 s flush timeout). It waited for that confirmation; with the
// default grace, for its whole StopGrace ("stopping before the calls consumer drained").
func TestStopIdleWithNATSDown(t *testing.T) {
	for _, workers := range []int{1, 0} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
			ex, stop, done := runExecutor(t, r, Config{Dispatcher: r.mgr, Relister: r.mgr, Workers: workers})

			r.env.Server.Shutdown()
			waitFor(t, "the executor's connection reconnecting", func() bool { return ex.nc.Status() == nats.RECONNECTING })
			flushed := make(chan error, 1)
			go func() { flushed <- ex.nc.Flush() }() // fails once its timeout passes: NATS is away
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("executor Run: %v", err)
				}
			case err := <-flushed:
				t.Errorf("Run did not return before a flush on its connection failed (%v): it waits for NATS to confirm the drain", err)
				waitRunReturns(t, done)
			}
		})
	}
}

// TestStopInFlightWithNATSDown: NATS away does not cut a call in flight short: a stopping
// executor whose connection is down still waits (within StopGrace) for the call one of its
// workers runs, and returns once it ends (NATS back by then, so that its answer is stored).
func TestStopInFlightWithNATSDown(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	var logs lockedLog
	ex, err := New(r.env.Connect(t), Config{Dispatcher: hold, Relister: r.mgr, Workers: 1, StopGrace: stopGraceLong,
		Log: testLogger(t).Output(io.MultiWriter(zerolog.NewTestWriter(t), &logs)).Level(zerolog.InfoLevel)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	waitFor(t, "executor ready with the tool", func() bool {
		return ex.Ready() && ex.reg.lookup("ticketing__createIssue") != nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "in-flight", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	r.submitHeld(ctx, hold, req)
	r.env.Server.Shutdown()
	waitFor(t, "the executor's connection reconnecting", func() bool { return ex.nc.Status() == nats.RECONNECTING })
	stop()
	// The workers were told to stop taking calls: the call in flight is what Run waits for.
	waitFor(t, "the executor noticing NATS is away", func() bool {
		return strings.Contains(logs.String(), "NATS is not connected")
	})
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while its call was still running", err)
	default:
	}
	hold.letGo()
	// Its answer is stored once NATS is back (without it, the publish retries for longer).
	restartServer(t, r.env)
	waitRunReturns(t, done)
}
