package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// gateJS is a JetStream context whose first Stream look-up (a client's first read of the
// results stream) waits until the test opens the gate, and which counts the look-ups done.
type gateJS struct {
	jetstream.JetStream
	once    sync.Once
	entered chan struct{} // closed when the first look-up waits at the gate
	gate    chan struct{} // closed by the test
	done    atomic.Int64  // look-ups returned
}

func newGateJS(js jetstream.JetStream, gated bool) *gateJS {
	g := &gateJS{JetStream: js, entered: make(chan struct{}), gate: make(chan struct{})}
	if !gated {
		close(g.gate)
	}
	return g
}

func (g *gateJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	defer g.done.Add(1)
	g.once.Do(func() {
		close(g.entered)
		select {
		case <-g.gate:
		case <-time.After(waitLimit):
		}
	})
	return g.JetStream.Stream(ctx, name)
}

// TestAwaitBeforeResultsStreamExists: Await's doc says it waits for the answer until ctx ends
// (an id never sent included), but it failed at once with "stream not found" when the results
// stream did not exist yet: an integrator started before the executor (or `mcpstream up`)
// declared the streams, or a results stream being recreated. It waits, and returns the answer
// once the stream is there.
func TestAwaitBeforeResultsStreamExists(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.ResultsStream); err != nil {
		t.Fatal(err)
	}
	js := newGateJS(env.JS, false)
	c := Client{NC: env.NC, JS: js}
	type outcome struct {
		res subjects.CallResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := c.Await(ctx, "local", "early")
		out <- outcome{res, err}
	}()
	waitFor(t, "Await's first read of the missing results stream", func() bool { return js.done.Load() >= 1 })
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: "early", Tenant: "local", Tool: "fixture__echo", Status: subjects.CallOK})
	if _, err := env.JS.Publish(ctx, subjects.Result("local", "early"), data); err != nil {
		t.Fatal(err)
	}
	o := <-out
	if o.err != nil || o.res.ID != "early" || o.res.Status != subjects.CallOK {
		t.Fatalf("Await before the results stream existed: %+v, %v; want the answer stored once it exists", o.res, o.err)
	}
}

// TestAwaitAnswerWinsOverClosedConnection: an answer that reached Await's subscription before
// its connection closed was lost: the read of the results stream that was under way failed on
// the closed connection and Await returned that error (and its polls, finding the connection
// closed, could return nats.ErrConnectionClosed with the answer waiting: select picks among
// ready cases at random). The answer that arrived is returned.
func TestAwaitAnswerWinsOverClosedConnection(t *testing.T) {
	env := natstest.Start(t)
	nc := env.Connect(t)
	base, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	js := newGateJS(base, true)
	c := Client{NC: nc, JS: js}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type outcome struct {
		res subjects.CallResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := c.Await(ctx, "local", "raced")
		out <- outcome{res, err}
	}()
	select {
	case <-js.entered: // subscribed, reading the results stream
	case <-time.After(waitLimit):
		t.Fatal("Await never read the results stream")
	}
	if err := nc.Flush(); err != nil { // (the server has Await's subscription)
		t.Fatal(err)
	}
	data, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: "raced", Tenant: "local", Tool: "fixture__echo", Status: subjects.CallOK})
	if err := env.NC.Publish(subjects.Result("local", "raced"), data); err != nil {
		t.Fatal(err)
	}
	// Once both round trips are done, the server has sent the answer to nc before its PONG,
	// and nc's reader has put it in Await's channel.
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	close(js.gate)
	o := <-out
	if o.err != nil || o.res.ID != "raced" {
		t.Fatalf("Await with the answer arrived before the connection closed: %+v, %v; want the answer", o.res, o.err)
	}
}

// TestCallDirectAnswerWinsOverClosedConnection: CallDirect's loop, with an answer in its
// channel and a poll finding the connection closed both ready, picked one at random, and half
// the time returned nats.ErrConnectionClosed although the answer had arrived. (Run a few
// times: before the fix each run failed with probability 1/2.)
func TestCallDirectAnswerWinsOverClosedConnection(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t) // no executor: the request waits in the calls stream
	for i := range 3 {
		id := "raced-direct-" + string(rune('a'+i))
		nc := env.Connect(t)
		base, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		js := newGateJS(base, true)
		c := Client{NC: nc, JS: js}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		type outcome struct {
			res subjects.CallResult
			err error
		}
		out := make(chan outcome, 1)
		go func() {
			res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`)})
			out <- outcome{res, err}
		}()
		select {
		case <-js.entered: // CallDirect's first poll reads the results stream
		case <-time.After(waitLimit):
			t.Fatal("CallDirect never read the results stream")
		}
		entered := time.Now()
		m, err := env.JS.Stream(ctx, subjects.CallsStream)
		if err != nil {
			t.Fatal(err)
		}
		req, err := m.GetLastMsgForSubject(ctx, subjects.Calls("local"))
		if err != nil {
			t.Fatal(err)
		}
		inbox := req.Header.Get(subjects.HeaderReplyTo)
		data, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: id, Tenant: "local", Tool: "fixture__echo", Status: subjects.CallOK})
		if err := env.NC.Publish(inbox, data); err != nil {
			t.Fatal(err)
		}
		mux := answerMuxFor(nc)
		waitFor(t, "the answer in CallDirect's channel", func() bool {
			mux.mu.Lock()
			defer mux.mu.Unlock()
			for _, ch := range mux.waiting {
				if len(ch) > 0 {
					return true
				}
			}
			return false
		})
		// The next poll's tick comes while the read is held: both cases are ready once it
		// returns. (A timer's firing, not another goroutine's progress, is waited for.)
		waitFor(t, "a poll's tick", func() bool { return time.Since(entered) > resultPoll+100*time.Millisecond })
		nc.Close()
		close(js.gate)
		o := <-out
		cancel()
		if o.err != nil || o.res.ID != id {
			t.Fatalf("run %d: CallDirect with the answer arrived before the connection closed: %+v, %v; want the answer", i, o.res, o.err)
		}
	}
}

// TestSubmitTooLargeIsOneError: Submit of a request too large to be stored returned a
// *subjects.Error too_large when it was over MaxCallBytes, but "submit ID: nats: maximum
// payload exceeded" when the connection's max_payload bound, and a wrapped JetStream API error
// when the calls stream's maximum message size did (the headers counted): a caller had to know
// three errors for one case. Each is the same *subjects.Error too_large naming the limit.
func TestSubmitTooLargeIsOneError(t *testing.T) {
	request := func(id string, n int) subjects.CallRequest {
		req := subjects.CallRequest{V: subjects.Version, ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":""}`),
			RequestedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
		empty, _ := json.Marshal(req)
		req.Arguments = json.RawMessage(`{"text":"` + strings.Repeat("x", n-len(empty)) + `"}`)
		return req
	}
	check := func(t *testing.T, env *natstest.Env, req subjects.CallRequest, names string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_, _, err := Client{JS: env.JS}.Submit(ctx, "local", req)
		var se *subjects.Error
		if !errors.As(err, &se) || se.Code != subjects.CodeTooLarge {
			t.Fatalf("Submit of %s: %v (%T), want a *subjects.Error too_large", req.ID, err, err)
		}
		if !strings.Contains(se.Message, names) {
			t.Errorf("Submit of %s: %q does not name %q", req.ID, se.Message, names)
		}
		s, err := env.JS.Stream(ctx, subjects.CallsStream)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
			t.Errorf("calls stream after the refused Submit: %+v %v, want nothing stored", info, err)
		}
	}
	t.Run("max_payload", func(t *testing.T) {
		env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
		check(t, env, request("big-payload", 2<<20), "max_payload is 1048576")
		check(t, env, request("big-both", 5<<20), "max_payload is 1048576")
	})
	t.Run("stream", func(t *testing.T) {
		env := natstest.Start(t)
		check(t, env, request("big-headers", subjects.MaxCallBytes-8), subjects.CallsStream)
		check(t, env, request("big-limit", subjects.MaxCallBytes+1), "the limit is 4194304")
	})
}

// funcDispatcher is a Dispatcher made of a function.
type funcDispatcher func(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply

func (f funcDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	return f(ctx, server, req)
}

// TestRefundWhenNothingReachedTheServer: a call whose dispatch never reached its server —
// found stale (revoked) at dispatch, or its connector not connected ("nothing was sent") every
// time — kept its rate counts, although it never ran: calls refused before dispatch give
// theirs back. Given back now; a call the server itself refused (HTTP 429: it reached the
// server) still counts, as the README says.
func TestRefundWhenNothingReachedTheServer(t *testing.T) {
	t.Parallel()
	rate := Rate{PerSecond: 0.01, Burst: 3}
	limits := Limits{Tools: map[string]Rate{"fixture__echo": rate}}
	var mode atomic.Value // "revoke", "down" or "429"
	var r *rig
	var ex *Executor
	disp := funcDispatcher(func(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
		switch mode.Load() {
		case "revoke":
			// The tool is revoked while the call is dispatched (its server down meanwhile):
			// the retry finds it stale.
			data, _ := json.Marshal(subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "fixture", Tools: []string{"echo"}, At: time.Now()})
			if _, err := r.env.JS.Publish(ctx, subjects.RegistryRevoked("fixture"), data); err != nil {
				t.Error(err)
			}
			for deadline := time.Now().Add(waitLimit); ex.reg.view.Tool("fixture", "echo").State != staleness.Revoked && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			fallthrough
		case "down":
			return subjects.DispatchReply{V: 1, Error: &subjects.Error{Code: subjects.CodeUnavailable,
				Message: "server fixture is not connected (connecting); nothing was sent"}}
		case "429":
			return subjects.DispatchReply{V: 1, Error: &subjects.Error{Code: subjects.CodeUnavailable, RetryAfterMs: 60000,
				Message: "the server refused the request with HTTP 429 (Too Many Requests); nothing ran"}}
		}
		return r.mgr.Dispatch(ctx, server, req)
	})
	r = startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	// (No reconnect grace: a connector refusing every call "not connected" in the executor's
	// first ReconnectGrace is waited for, as after a restart; here it stays down.)
	ex = r.startExecutor(r.managerConfig(Config{Limits: limits, Dispatcher: disp, ReconnectGrace: -1}), r.env.NC)
	r.waitTool("fixture__echo")
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	scope := scopeLimit{subjects.LimitScopeTool, "fixture__echo", rate}
	start := time.Now()

	mode.Store("429")
	if res := r.call("local", "fixture__echo", `{"text":"x"}`); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("call refused by the server: %s %+v, want unavailable", res.Status, res.Error)
	}
	if got := counterTotal(t, other, scope, start, time.Now()); got != 1 {
		t.Errorf("counter after a call the server refused: %d, want 1 (it reached the server)", got)
	}

	mode.Store("down")
	if res := r.call("local", "fixture__echo", `{"text":"x"}`); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("call to a server not connected: %s %+v, want unavailable", res.Status, res.Error)
	}
	waitFor(t, "the counts of the call never sent given back", func() bool {
		return counterTotal(t, other, scope, start, time.Now()) == 1
	})

	mode.Store("revoke")
	if res := r.call("local", "fixture__echo", `{"text":"x"}`); res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Fatalf("call revoked at dispatch: %s %+v, want stale", res.Status, res.Error)
	}
	waitFor(t, "the counts of the call found stale at dispatch given back", func() bool {
		return counterTotal(t, other, scope, start, time.Now()) == 1
	})
}

// TestPanicAnswerCounted: a call whose handler panicked was answered (failed) but counted
// nowhere in Stats (so not in /metrics): answered, failed and the seconds stayed as if it had
// never come. It counts as any failed call.
func TestPanicAnswerCounted(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	ex := r.startExecutor(r.managerConfig(Config{Dispatcher: panickingDispatcher{}}), r.env.NC)
	r.waitTool("ticketing__createIssue")
	before := ex.Stats()
	res := r.call("local", "ticketing__createIssue", `{"title":"t","body":"b","priority":"low"}`, func(req *subjects.CallRequest) { req.ID = "panics-counted" })
	if res.Status != subjects.CallFailed {
		t.Fatalf("answer %s %+v, want failed", res.Status, res.Error)
	}
	after := ex.Stats()
	if after.Answered-before.Answered != 1 || after.Failed-before.Failed != 1 || after.Seconds <= before.Seconds {
		t.Errorf("Stats after a call answered after a panic: answered +%d, failed +%d, seconds %v → %v; want +1, +1 and more seconds",
			after.Answered-before.Answered, after.Failed-before.Failed, before.Seconds, after.Seconds)
	}
}

// TestNeverSentNotFooledByTheServersWords: a server's refusal quotes its own answer after the
// connector's words; one whose body says "nothing was sent" reached the server all the same,
// and keeps its rate counts.
func TestNeverSentNotFooledByTheServersWords(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{"server kb is not connected (connecting); nothing was sent", true},
		{"the call could not be sent (nothing was sent): write: broken pipe", true},
		{"the server refused the request with HTTP 429 (Too Many Requests); nothing ran: slow down, nothing was sent", false},
		{"the server refused the call without running it (its session or the host's credentials): unauthorized", false},
	} {
		rep := subjects.DispatchReply{Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: c.msg}}
		if got := neverSent(rep); got != c.want {
			t.Errorf("neverSent(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
	// A connector that sets DispatchReply.NotSent is read by it, whatever its words; a code
	// that says the call may have run is never taken for one not sent.
	flagged := subjects.DispatchReply{NotSent: true, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "server kb is not connected"}}
	if !neverSent(flagged) {
		t.Error("neverSent ignores DispatchReply.NotSent")
	}
	flagged.Error.Code = subjects.CodeOutcomeUnknown
	if neverSent(flagged) {
		t.Error("neverSent takes NotSent with outcome_unknown for a call that never left")
	}
}
