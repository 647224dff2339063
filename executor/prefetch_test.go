package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestNoCallWaitsUnheartbeated: while every worker is busy, a new call stays in the stream. It
// used to be delivered into the consumer iterator's buffer, where no heartbeat kept it: after
// AckWait JetStream redelivered it to another executor and both copies ran.
func TestNoCallWaitsUnheartbeated(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{Workers: 2}, r.env.Connect(t))
	r.waitTool("fixture__slow")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	submit := func(id string, ms int) {
		t.Helper()
		if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__slow",
			Arguments: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms)), Principal: subjects.Principal{User: "local"}}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := r.env.JS.Consumer(ctx, subjects.CallsStream, subjects.ExecutorConsumer)
	if err != nil {
		t.Fatal(err)
	}
	delivered := func() (ackPending, pending int) {
		t.Helper()
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending, int(info.NumPending)
	}
	// One worker frees up while the other is busy: it asks for calls again, and the second
	// call it is sent must not arrive before it can take it.
	submit("short", 100)
	submit("busy-1", 2000)
	if _, err := r.client.Await(ctx, "local", "short"); err != nil {
		t.Fatal(err)
	}
	submit("busy-2", 2000)
	// Both busy calls taken, none pending: "short"'s answer comes before its ack (the worker's
	// bookkeeping), so ack pending 2 alone may still be short and busy-1, busy-2 waiting for
	// that worker (then look 0 below saw 1 delivered, 2 pending, on a loaded machine).
	waitFor(t, "both workers busy", func() bool { a, p := delivered(); return a == 2 && p == 0 })
	submit("waiting", 10)
	waitFor(t, "the third call counted", func() bool { a, p := delivered(); return a+p == 3 })
	// It must stay in the stream while both workers are busy (a bounded look: 50 × 10 ms,
	// well inside the 2 s calls).
	for i := range 50 {
		if a, p := delivered(); a != 2 || p != 1 {
			t.Fatalf("look %d: %d calls delivered (want 2: one per busy worker), %d pending in the stream (want 1)", i, a, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range []string{"busy-1", "busy-2", "waiting"} {
		res, err := r.client.Await(ctx, "local", id)
		if err != nil || res.Status != subjects.CallOK {
			t.Fatalf("%s: %v %s", id, err, fmt.Sprint(res.Error))
		}
	}
}

// TestConsumerDeletedWhileServing: workers whose consumer is deleted under them declare it again
// and go on taking calls; they used to stop silently while the executor still said it was ready.
func TestConsumerDeletedWhileServing(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	if res := r.call("local", "fixture__echo", `{"text":"before"}`); res.Status != subjects.CallOK {
		t.Fatalf("before: %s %+v", res.Status, res.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteConsumer(ctx, subjects.CallsStream, subjects.ExecutorConsumer); err != nil {
		t.Fatal(err)
	}
	if res := r.call("local", "fixture__echo", `{"text":"after"}`); res.Status != subjects.CallOK {
		t.Fatalf("after: %s %+v", res.Status, res.Error)
	}
	if !r.ex.Ready() {
		t.Error("executor not ready")
	}
}

// TestConsumerOutlastsLastDelivery: the consumer delivers a call more times than the workers'
// MaxDeliver, at which they answer it without running it: a nak of that answer (storing it
// failed) must not be the consumer's last delivery, or the call is dropped unanswered.
func TestConsumerOutlastsLastDelivery(t *testing.T) {
	for _, n := range []int{0, 1, 5, 12} {
		cfg := Config{MaxDeliver: n}
		cc := ConsumerConfig(cfg)
		if want := cfg.withDefaults().MaxDeliver; cc.MaxDeliver <= want {
			t.Errorf("MaxDeliver %d: the consumer delivers %d times, not more than the workers' %d", n, cc.MaxDeliver, want)
		}
	}
}

// TestPullRequestsPerWorker: every worker keeps a pull request waiting, and the consumer takes
// more than the server's default 512 (a shared pull of one call at a time serialized the
// workers; shared by a few workers, pull requests got lost now and then; and past 512 waiting
// the workers beyond were left idle). A consumer declared before keeps its MaxWaiting (JetStream
// cannot change it): declaring the state again does not fail on it.
func TestPullRequestsPerWorker(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// A consumer as an older version declared it (MaxWaiting: the server's default).
	old := ConsumerConfig(Config{})
	old.MaxWaiting = 0
	if _, err := r.env.JS.CreateOrUpdateConsumer(ctx, subjects.CallsStream, old); err != nil {
		t.Fatal(err)
	}
	if err := EnsureState(ctx, r.env.JS, Config{}); err != nil {
		t.Fatalf("declaring the state over an older consumer: %v", err)
	}
	if err := r.env.JS.DeleteConsumer(ctx, subjects.CallsStream, subjects.ExecutorConsumer); err != nil {
		t.Fatal(err)
	}
	r.startExecutor(Config{Workers: 600}, r.env.Connect(t))
	r.waitTool("fixture__echo")
	cons, err := r.env.JS.Consumer(ctx, subjects.CallsStream, subjects.ExecutorConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.MaxWaiting; got != maxWaiting {
		t.Errorf("MaxWaiting %d, want %d", got, maxWaiting)
	}
	waitFor(t, "a pull request per worker", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 600
	})
	for i := range 20 {
		if res := r.call("local", "fixture__echo", fmt.Sprintf(`{"text":"%d"}`, i)); res.Status != subjects.CallOK {
			t.Fatalf("call %d: %s %+v", i, res.Status, res.Error)
		}
	}
}
