package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientMissingConnectionOrJS: a Client without NC, or without the JS that Submit and Await
// need, returns an error from every method: Submit and Await panicked on a nil JS, and Call and
// CallDirect with JS but no NC panicked after storing a nil connection in the process's answer
// muxes, so that every later first call on another connection panicked too (the sweep of
// closed connections called IsClosed on it).
func TestClientMissingConnectionOrJS(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "partial", Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`)}
	noPanic := func(what string, f func() error) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", what, p)
					err = errors.New("panicked")
				}
			}()
			err = f()
		}()
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	for name, c := range map[string]Client{"zero": {}, "no NC": {JS: env.JS}, "no JS": {NC: env.NC}} {
		noPanic(name+" Call", func() error { _, err := c.Call(ctx, "local", req); return err })
		noPanic(name+" CallDirect", func() error { _, err := c.CallDirect(ctx, "local", req); return err })
		if c.JS != nil {
			// (Submit needs JS alone: it publishes on JS's connection.)
			if _, _, err := c.Submit(ctx, "local", req); err != nil {
				t.Errorf("%s Submit: %v", name, err)
			}
		} else {
			noPanic(name+" Submit", func() error { _, _, err := c.Submit(ctx, "local", req); return err })
		}
		noPanic(name+" Await", func() error { _, err := c.Await(ctx, "local", "partial"); return err })
		noPanic(name+" Decide", func() error { _, err := c.Decide(ctx, subjects.Approval{ID: "partial", Approve: true}); return err })
	}
	// A client that works, on a new connection, after all that: its first call sets up that
	// connection's answer mux (and sweeps the muxes of closed connections).
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	noPanic("CallDirect on a new connection", func() error {
		short, stop := context.WithCancel(ctx)
		stop() // no executor runs: only the set-up and the publish are tested
		_, err := Client{NC: nc, JS: js}.CallDirect(short, "local", subjects.CallRequest{ID: "after", Tool: "fixture__echo"})
		return err
	})
}

// TestCallOverMaxPayloadIsTooLarge: a request under MaxCallBytes but over the connection's
// max_payload (1 MiB, a NATS server's default) cannot be sent. CallDirect answered it too_large
// (refused: nothing sent); Call returned the publish's error ("nats: maximum payload
// exceeded"), which the CLI reported as unavailable — a code that says retrying may work.
func TestCallOverMaxPayloadIsTooLarge(t *testing.T) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	args := json.RawMessage(`{"text":"` + strings.Repeat("x", 2<<20) + `"}`)
	for name, c := range map[string]Client{"Call": {NC: env.NC}, "Call with JS": {NC: env.NC, JS: env.JS}} {
		res, err := c.Call(ctx, "local", subjects.CallRequest{ID: "big-" + strings.ReplaceAll(name, " ", "-"), Tool: "fixture__echo", Arguments: args})
		if err != nil {
			t.Errorf("%s: %v, want a too_large refusal", name, err)
			continue
		}
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
			t.Errorf("%s: %+v, want refused too_large", name, res)
		}
	}
	res, err := Client{NC: env.NC, JS: env.JS}.CallDirect(ctx, "local", subjects.CallRequest{ID: "big-direct", Tool: "fixture__echo", Arguments: args})
	if err != nil || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
		t.Errorf("CallDirect: %+v %v, want refused too_large", res, err)
	}
}

// TestClientReturnsWhenConnectionCloses: a connection closed under CallDirect or Await (a
// gateway shutting down) ends them with nats.ErrConnectionClosed, as it ends Call: no answer
// can come on it, and the results stream cannot be read. They waited until the caller's
// deadline (for ever without one), holding their goroutines.
func TestClientReturnsWhenConnectionCloses(t *testing.T) {
	env := natstest.Start(t) // no executor: the call waits in the calls stream
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := Client{NC: nc, JS: js}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type outcome struct {
		what string
		err  error
	}
	out := make(chan outcome, 2)
	go func() {
		_, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "closed-direct", Tool: "fixture__echo"})
		out <- outcome{"CallDirect", err}
	}()
	go func() {
		_, err := c.Await(ctx, "local", "never-sent")
		out <- outcome{"Await", err}
	}()
	// Both wait: CallDirect's request is stored, Await's subscription is up.
	waitFor(t, "the call is stored and Await subscribed", func() bool {
		s, err := env.JS.Stream(ctx, subjects.CallsStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1 && nc.NumSubscriptions() >= 2
	})
	nc.Close()
	for range 2 {
		o := <-out
		if !errors.Is(o.err, nats.ErrConnectionClosed) {
			t.Errorf("%s on a closed connection: %v, want %v", o.what, o.err, nats.ErrConnectionClosed)
		}
	}
}

// TestTooLargeNamesTheConnectionLimit: a request over both the calls stream's limit
// (MaxCallBytes, 4 MiB) and the connection's smaller max_payload (1 MiB) was refused saying "the
// limit is 4194304": a caller that shrank it under 4 MiB was refused again. The refusal names
// the limit that binds, for Call and CallDirect alike (CallDirect said only "nats: maximum
// payload exceeded" of a request between the two).
func TestTooLargeNamesTheConnectionLimit(t *testing.T) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c := Client{NC: env.NC, JS: env.JS}
	for _, size := range []int{2 << 20, 5 << 20} {
		args := json.RawMessage(`{"text":"` + strings.Repeat("x", size) + `"}`)
		for name, call := range map[string]func(subjects.CallRequest) (subjects.CallResult, error){
			"Call": func(r subjects.CallRequest) (subjects.CallResult, error) {
				return Client{NC: env.NC}.Call(ctx, "local", r)
			},
			"Call with JS": func(r subjects.CallRequest) (subjects.CallResult, error) { return c.Call(ctx, "local", r) },
			"CallDirect":   func(r subjects.CallRequest) (subjects.CallResult, error) { return c.CallDirect(ctx, "local", r) },
		} {
			res, err := call(subjects.CallRequest{Tool: "fixture__echo", Arguments: args})
			if err != nil || res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
				t.Errorf("%s of %d bytes: %+v %v, want refused too_large", name, size, res.Error, err)
				continue
			}
			if !strings.Contains(res.Error.Message, "max_payload is 1048576") {
				t.Errorf("%s of %d bytes: %q does not name the connection's max_payload", name, size, res.Error.Message)
			}
		}
	}
}
