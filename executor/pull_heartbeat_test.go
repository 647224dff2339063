package executor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestWorkerLateHeartbeatsNoSecondPull: a worker whose pull request's idle heartbeats come late
// (a starved process, a busy shared connection) takes the request for lost and asks again
// (TestWorkersPullAgainAfterLostPull), but the first request may still be waiting at the
// server. nats.go's iterator then kept two requests open for one worker from then on, both
// delivering into its one-message buffer: while the worker ran a call, the other request's
// heartbeats filled the buffer and the next message was dropped by the client ("slow
// consumer") — a call delivered then stayed unanswered until AckWait redelivered it (30 s),
// a delivery wasted. Here the proxy holds back what the server sends until the worker has
// asked again; then the worker runs a call long enough for the other request's heartbeats
// (workerHeartbeat) to overflow its buffer: no message may be dropped.
func TestWorkerLateHeartbeatsNoSecondPull(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	px := startPullDropper(t, strings.TrimPrefix(r.env.URL, "nats://"))
	var dropped atomic.Int64
	nc, err := nats.Connect("nats://"+px.addr(), nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			dropped.Add(1)
			t.Logf("slow consumer on %s", sub.Subject)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.startExecutor(r.managerConfig(Config{Workers: 1}), nc)
	r.waitTool("fixture__echo")
	if res := r.call("local", "fixture__echo", `{"text":"warm"}`); res.Status != subjects.CallOK {
		t.Fatalf("warm-up call: %s %+v", res.Status, res.Error)
	}
	waitFor(t, "the worker's pull request", func() bool { return px.pulls.Load() >= 2 })

	// The heartbeats of the worker's waiting request come late: it asks again (or, fixed, first
	// lets go of its inbox: the server's confirmation, held back, comes after).
	asked, unsubs := px.pulls.Load(), px.unsubs.Load()
	px.hold.Lock()
	held := time.Now()
	waitFor(t, "the worker asking again", func() bool {
		return time.Since(held) > 2*workerHeartbeat && (px.pulls.Load() > asked || px.unsubs.Load() > unsubs)
	})
	px.hold.Unlock()
	waitFor(t, "the worker asking again", func() bool { return px.pulls.Load() > asked })

	// A call that runs past two heartbeats of a request still waiting for the same worker.
	if res := r.call("local", "fixture__slow", `{"ms":5000}`, timeoutMs(20000)); res.Status != subjects.CallOK {
		t.Fatalf("slow call: %s %+v", res.Status, res.Error)
	}
	if res := r.call("local", "fixture__echo", `{"text":"after"}`); res.Status != subjects.CallOK {
		t.Fatalf("call after: %s %+v", res.Status, res.Error)
	}
	if n := dropped.Load(); n > 0 {
		t.Fatalf("%d slow-consumer errors on the executor's connection: a worker had more pull requests open than its buffer holds", n)
	}
}

// TestWorkerRepullConsumerDeleted: the consumer deleted while a worker lets go of a pull request
// that missed its heartbeats (repull). Its "consumer deleted" went to the inbox let go (or
// ended the drained iterator): the worker must declare the consumer again, as when the
// consumer is deleted under a waiting request (TestConsumerDeletedWhileServing). It asked again
// on the consumer as it was, answered "no responders" by a consumer that no longer exists, and
// again every two heartbeats: with one worker, no call was taken any more while the executor
// said it was ready.
func TestWorkerRepullConsumerDeleted(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	px := startPullDropper(t, strings.TrimPrefix(r.env.URL, "nats://"))
	nc, err := nats.Connect("nats://" + px.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.startExecutor(r.managerConfig(Config{Workers: 1}), nc)
	r.waitTool("fixture__echo")
	if res := r.call("local", "fixture__echo", `{"text":"warm"}`); res.Status != subjects.CallOK {
		t.Fatalf("warm-up call: %s %+v", res.Status, res.Error)
	}
	waitFor(t, "the worker's pull request", func() bool { return px.pulls.Load() >= 2 })

	// The heartbeats come late: the worker lets go of its request's inbox (an UNSUB), the
	// server's confirmation held back; meanwhile the consumer is deleted.
	unsubs := px.unsubs.Load()
	px.hold.Lock()
	waitFor(t, "the worker letting go of its inbox", func() bool { return px.unsubs.Load() > unsubs })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteConsumer(ctx, subjects.CallsStream, subjects.ExecutorConsumer); err != nil {
		px.hold.Unlock()
		t.Fatal(err)
	}
	px.hold.Unlock()

	// Three rounds of missed heartbeats: the worker asked again three times on the deleted
	// consumer meanwhile.
	if res := r.call("local", "fixture__echo", `{"text":"after"}`, timeoutMs(int64(6*workerHeartbeat/time.Millisecond))); res.Status != subjects.CallOK {
		t.Fatalf("a call after the consumer was deleted during a repull: %s %+v (the worker did not declare it again)", res.Status, res.Error)
	}
	if !r.ex.Ready() {
		t.Error("executor not ready")
	}
}
