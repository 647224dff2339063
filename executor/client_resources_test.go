package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientLeavesNothingBehind: many calls through every client path — answered, and given up
// by their caller mid-call (a slow tool) — leave no goroutine and no subscription behind on
// the caller's connection, and the front end holds no waiting call once they are all answered.
func TestClientLeavesNothingBehind(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	nc, err := nats.Connect(r.env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := Client{NC: nc, JS: js}
	req := func(id, tool, args string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: tool, Arguments: json.RawMessage(args), Principal: subjects.Principal{User: "local"}}
	}
	round := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if res, err := c.Call(ctx, "local", req(fmt.Sprintf("call-%d", i), "fixture__echo", `{"text":"x"}`)); err != nil || res.Status != subjects.CallOK {
			t.Fatalf("Call: %+v %v", res, err)
		}
		if res, err := c.CallDirect(ctx, "local", req(fmt.Sprintf("direct-%d", i), "fixture__echo", `{"text":"x"}`)); err != nil || res.Status != subjects.CallOK {
			t.Fatalf("CallDirect: %+v %v", res, err)
		}
		sent, _, err := c.Submit(ctx, "local", req(fmt.Sprintf("submit-%d", i), "fixture__echo", `{"text":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Await(ctx, "local", sent.ID); err != nil || res.Status != subjects.CallOK {
			t.Fatalf("Await: %+v %v", res, err)
		}
		// Given up mid-call: the caller's context ends while a slow call runs.
		slow := `{"ms":300}`
		short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := c.Call(short, "local", req(fmt.Sprintf("call-slow-%d", i), "fixture__slow", slow)); err == nil {
			t.Fatalf("Call of a slow tool answered within 50ms")
		}
		stop()
		short, stop = context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := c.CallDirect(short, "local", req(fmt.Sprintf("direct-slow-%d", i), "fixture__slow", slow)); err == nil {
			t.Fatalf("CallDirect of a slow tool answered within 50ms")
		}
		stop()
		sent, _, err = c.Submit(ctx, "local", req(fmt.Sprintf("submit-slow-%d", i), "fixture__slow", slow))
		if err != nil {
			t.Fatal(err)
		}
		short, stop = context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := c.Await(short, "local", sent.ID); err == nil {
			t.Fatalf("Await of a slow tool answered within 50ms")
		}
		stop()
	}
	round(0) // the connection's request mux, the answer mux and the JetStream context are set up once
	r.waitCallsSettled(context.Background())
	waitFor(t, "the front end holds no waiting call", func() bool { return len(r.ex.execSem) == 0 })
	goBefore, subsBefore := runtime.NumGoroutine(), nc.NumSubscriptions()
	// More rounds than the goroutines' slack below: a goroutine left per round on any one path
	// still shows (6 calls a round; 30 rounds before, which took 6 s of the test's 8).
	const rounds = 15
	for i := 1; i <= rounds; i++ {
		round(i)
	}
	r.waitCallsSettled(context.Background())
	waitFor(t, "the front end holds no waiting call", func() bool { return len(r.ex.execSem) == 0 })
	if n := nc.NumSubscriptions(); n > subsBefore {
		t.Errorf("%d subscriptions on the caller's connection after %d rounds of calls, %d before", n, rounds, subsBefore)
	}
	// Goroutines end asynchronously (a subscription's delivery, a timer): wait for them, bounded.
	var n int
	deadline := time.Now().Add(waitLimit)
	for n = runtime.NumGoroutine(); n > goBefore+10 && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > goBefore+10 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after %d rounds of calls, %d before\n%s", n, rounds, goBefore, buf[:runtime.Stack(buf, true)])
	}
}
