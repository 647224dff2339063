package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientLongIDRefusedBeforeSending: an id over the executor's 256 bytes (as sent: each byte
// that is not UTF-8 is three) is no id to answer to: the executor refuses it bad_request on the
// request's reply inbox alone, with no id, and stores no answer. CallDirect passed that refusal
// over as another call's (its id is not the call's) and waited until its deadline; Submit
// stored it, and Await waited for an answer that never comes. Every client path refuses it
// bad_request without sending it, as it does a request too large.
func TestClientLongIDRefusedBeforeSending(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ids := map[string]string{
		"ascii":       strings.Repeat("i", maxCallID+1),
		"not UTF-8":   "c-" + strings.Repeat("\xff", 90), // 92 bytes given, 272 sent
		"just within": strings.Repeat("i", maxCallID),
	}
	for name, id := range ids {
		t.Run(name, func(t *testing.T) {
			within := name == "just within"
			for _, mode := range []string{"Call", "CallDirect", "Submit"} {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				req := subjects.CallRequest{ID: id + mode, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`),
					Principal: subjects.Principal{User: "local"}}
				if within {
					req.ID = id[:len(id)-len(mode)] + mode
				}
				var res subjects.CallResult
				var err error
				switch mode {
				case "Call":
					res, err = r.client.Call(ctx, "local", req)
				case "CallDirect":
					res, err = r.client.CallDirect(ctx, "local", req)
				case "Submit":
					var sent subjects.CallRequest
					if sent, _, err = r.client.Submit(ctx, "local", req); err == nil && within {
						res, err = r.client.Await(ctx, "local", sent.ID)
					}
					var se *subjects.Error
					if !within && errors.As(err, &se) {
						res, err = subjects.CallResult{Status: subjects.CallRefused, Error: se}, nil
					}
				}
				cancel()
				switch {
				case err != nil:
					t.Errorf("%s: %v", mode, err)
				case within && res.Status != subjects.CallOK:
					t.Errorf("%s of a %d-byte id: %s %+v, want ok", mode, len(req.ID), res.Status, res.Error)
				case !within && (res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeBadRequest ||
					!strings.Contains(res.Error.Message, "at most 256")):
					t.Errorf("%s: %s %+v, want refused bad_request naming the limit", mode, res.Status, res.Error)
				}
			}
		})
	}
}

// TestClientCancelledContextSendsNothing: a context that already ended sends nothing, as
// Submit and nats.go's request/reply (Call without JS) do: Call with JS and CallDirect
// published the request all the same and returned ctx's error — the caller told the call
// was given up, the tool run. Observed on the subjects themselves: a marker published after
// the calls arrives with nothing of theirs before it (one publisher's messages keep their
// order to one subscription).
func TestClientCancelledContextSendsNothing(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	watch, err := nats.Connect(r.env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Close)
	seen, err := watch.SubscribeSync(subjects.Root + ".*.local")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	req := func(id string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`), Principal: subjects.Principal{User: "local"}}
	}
	noJS := Client{NC: r.client.NC}
	calls := map[string]func() error{
		"cancelled-call":       func() error { _, err := r.client.Call(ended, "local", req("cancelled-call")); return err },
		"cancelled-call-nojs":  func() error { _, err := noJS.Call(ended, "local", req("cancelled-call-nojs")); return err },
		"cancelled-calldirect": func() error { _, err := r.client.CallDirect(ended, "local", req("cancelled-calldirect")); return err },
		"cancelled-submit":     func() error { _, _, err := r.client.Submit(ended, "local", req("cancelled-submit")); return err },
	}
	for id, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: got %v, want context.Canceled", id, err)
		}
	}
	marker := subjects.Root + ".marker.local"
	if err := r.client.NC.Publish(marker, nil); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := seen.NextMsg(waitLimit)
		if err != nil {
			t.Fatalf("the marker did not arrive: %v", err)
		}
		if m.Subject == marker {
			return
		}
		var sent subjects.CallRequest
		if json.Unmarshal(m.Data, &sent) == nil && calls[sent.ID] != nil {
			t.Errorf("%s was sent on %s with its context already cancelled", sent.ID, m.Subject)
		}
	}
}

// TestDecideIDNotUTF8: a call id holding bytes that are not UTF-8 is sent, answered and waits
// for approval as JSON carries it (each such byte U+FFFD), on that id's approvals subject.
// Decide built the subject of the id as given, where nobody waits: ErrNoWaiter for a call
// that waited, while Call, Submit and Await take the id as given.
func TestDecideIDNotUTF8(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := "c-\xff-approve"
	sent, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("local", sent.ID) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"})
	if err != nil || !rep.OK {
		t.Fatalf("Decide by the id as given: %+v %v", rep, err)
	}
	res, err := r.client.Await(ctx, "local", id)
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("after approval: %s %+v %v", res.Status, res.Error, err)
	}
}

// TestAwaitAndDecideLongIDRefused: an id over the executor's 256 bytes (as sent) is never a
// call's: Call, CallDirect and Submit refuse it bad_request unsent, and the executor too. Await
// waited for it until its context ended, and Decide answered "no call is waiting" — and an id
// long enough that its results or approvals subject passed the server's max_control_line
// (4 KiB) got the caller's connection closed by the server (a gateway's shared connection:
// every call in flight on it cut). Both refuse it bad_request at once, sending nothing, as
// Call does (a refusal, not an error: Await a CallResult refused, Decide an ApprovalReply).
func TestAwaitAndDecideLongIDRefused(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	c, disconnects := watchedClient(t, r)
	nc := c.NC
	ids := map[string]string{
		"ascii":           strings.Repeat("i", maxCallID+1),
		"not UTF-8":       "c-" + strings.Repeat("\xff", 90), // 92 bytes given, 272 sent
		"past a SUB line": strings.Repeat("i", 5000),
	}
	want := func(what string, e *subjects.Error) {
		t.Helper()
		if e == nil || e.Code != subjects.CodeBadRequest || !strings.Contains(e.Message, "at most 256") {
			t.Errorf("%s: %+v, want bad_request naming the limit", what, e)
		}
	}
	for name, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		res, err := c.Await(ctx, "local", id)
		if err != nil {
			t.Errorf("Await of the %s id: %v, want a refusal at once", name, err)
		} else if res.Status != subjects.CallRefused {
			t.Errorf("Await of the %s id: %s, want refused", name, res.Status)
		} else {
			want("Await of the "+name+" id", res.Error)
		}
		rep, err := c.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"})
		if err != nil {
			t.Errorf("Decide of the %s id: %v, want a refusal at once", name, err)
		} else if rep.OK {
			t.Errorf("Decide of the %s id: ok", name)
		} else {
			want("Decide of the "+name+" id", rep.Error)
		}
		cancel()
	}
	// The connection still serves: the server closed nothing.
	if err := nc.Flush(); err != nil || disconnects.Load() > 0 || nc.IsClosed() {
		t.Errorf("the connection after the long ids: %v, %d disconnects, closed %v", err, disconnects.Load(), nc.IsClosed())
	}
}

// watchedClient is a client (with a JetStream context) on a connection of its own to r's
// server, and the count of that connection's disconnects: the server closes a connection that
// sends a protocol line past its max_control_line.
func watchedClient(t *testing.T, r *rig) (Client, *atomic.Int64) {
	t.Helper()
	disconnects := new(atomic.Int64)
	nc, err := nats.Connect(r.env.URL, nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return Client{NC: nc, JS: js}, disconnects
}
