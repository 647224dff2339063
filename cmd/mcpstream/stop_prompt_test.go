package main

import (
	"context"
	"encoding/json"
	"regexp"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

var natsInStartLine = regexp.MustCompile(`NATS (nats://\S+), `)

// `mcpstream executor` and `mcpstream up` (on an external NATS and on its embedded one) stopped
// with --stop-timeout far past the test's waits return once their work is done: idle at once,
// and with a call in flight once the call's answer is stored, not at the end of the executor's
// grace (inFlightGrace of --stop-timeout).
func TestRolesStopOnceCallsDone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		embedded bool
	}{
		{"executor", []string{"executor", "--workers", "2"}, false},
		{"up", []string{"up"}, false}, // (--nats-listen is for the embedded server only)
		{"up embedded NATS", []string{"up", "--nats-listen", "127.0.0.1:0"}, true},
	} {
		for _, inFlight := range []bool{false, true} {
			name := tc.name + "/idle"
			if inFlight {
				name = tc.name + "/call in flight"
			}
			t.Run(name, func(t *testing.T) { testStopOnceCallsDone(t, tc.args, tc.embedded, inFlight) })
		}
	}
}

func testStopOnceCallsDone(t *testing.T, args []string, embedded, inFlight bool) {
	args = append(args, "--data", t.TempDir(), "--http-listen", "", "--stop-timeout", "10m")
	var env *natstest.Env
	if !embedded {
		env = natstest.Start(t)
		args = append(args, "--nats", env.URL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	waitFor(t, "the executor serving", 600, func() bool {
		select {
		case err := <-done:
			t.Fatalf("%s exited: %v\n%s", args[0], err, errOut.String())
		default:
		}
		return strings.Contains(errOut.String(), "executor serving")
	})
	if embedded {
		m := natsInStartLine.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no NATS URL in the start line:\n%s", out.String())
		}
		nc, err := nats.Connect(m[1])
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		env = &natstest.Env{URL: m[1], NC: nc, JS: js}
	}

	cl := executor.Client{NC: env.NC, JS: env.JS}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	var held *nats.Msg
	var heldID string
	var dispatched chan *nats.Msg
	if inFlight {
		publishDemoTools(t, env, "slow", "wait_for_it")
		// The connector of server "slow" (over NATS): it holds the call until released.
		// Every dispatch is kept and answered: on a loaded machine a call's dispatch may come
		// after the loop below gave up on it and submitted the next id, which is then
		// dispatched too (held as the first dispatch was, it must be answered, or up waits for
		// its call timeout).
		dispatched = make(chan *nats.Msg, 128)
		sub, err := env.NC.Subscribe(subjects.Dispatch("slow"), func(m *nats.Msg) {
			select {
			case dispatched <- m:
			default:
				t.Errorf("more than %d dispatches", cap(dispatched))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := env.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		// The tool reaches the executor's registry view asynchronously: a call before that
		// is refused not_found (answered, not dispatched); the next id is tried.
		for i := 0; held == nil; i++ {
			if i == 100 {
				t.Fatalf("no call was dispatched\n%s", errOut.String())
			}
			id := "stop-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			if _, _, err := cl.Submit(cctx, "local", subjects.CallRequest{ID: id, Tool: "slow__wait_for_it", Arguments: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(cctx, 100*time.Millisecond)
			select {
			case held = <-dispatched:
				var req subjects.DispatchRequest
				if err := json.Unmarshal(held.Data, &req); err != nil {
					t.Fatalf("dispatch request: %v", err)
				}
				heldID = req.CallID // (an earlier id's, when its dispatch came late)
			case <-wctx.Done():
			}
			wcancel()
		}
	}

	cancel()
	if held != nil {
		waitFor(t, "the executor stopping", 600, func() bool { return strings.Contains(errOut.String(), "stopping") })
		data, _ := json.Marshal(subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)})
		if err := held.Respond(data); err != nil {
			t.Fatal(err)
		}
		// Later dispatches (see dispatched), as they come until up has stopped.
		go func() {
			for {
				select {
				case m := <-dispatched:
					m.Respond(data)
				case <-cctx.Done():
					return
				}
			}
		}()
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s stopped with %v\n%s", args[0], err, errOut.String())
		}
	case <-time.After(60 * time.Second):
		var stacks strings.Builder
		pprof.Lookup("goroutine").WriteTo(&stacks, 1) // where it waits
		t.Fatalf("%s still running 60s after the interrupt (the executor's grace is %s: it waits for the grace, not for its calls)\n%s\ngoroutines:\n%s",
			args[0], inFlightGrace(10*time.Minute), errOut.String(), stacks.String())
	}
	if held != nil && !embedded { // (the embedded NATS stopped with up)
		res, err := cl.Await(cctx, "local", heldID)
		if err != nil || res.Status != subjects.CallOK {
			t.Errorf("the held call's answer: %s %+v, %v (want ok)", res.Status, res.Error, err)
		}
	}
	if strings.Contains(errOut.String(), "stopping with calls still running") || strings.Contains(errOut.String(), "stopping before the calls consumer drained") {
		t.Errorf("the executor's grace ran out:\n%s", errOut.String())
	}
}
