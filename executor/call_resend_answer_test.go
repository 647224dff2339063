package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallDuplicateAfterResend: a Call that resends its request on the calls stream (no answer
// within PubAckWait) while another caller's request of the same id runs is still answered as
// a duplicate, as it was before resends: its resend's PubAck says Duplicate, so the stored
// request is not one its own resend stored. (Call cleared Duplicate on every answer after a
// resend, and `call --id ID` again to get an interrupted call's answer said duplicate: false.)
func TestCallDuplicateAfterResend(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "dup-after-resend", Tool: "fixture__slow",
		Arguments: json.RawMessage(`{"ms":2500}`), Principal: subjects.Principal{User: "local"}}
	firstDone := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", req)
		if err != nil {
			t.Errorf("first call: %v", err)
		}
		firstDone <- res
	}()
	calls, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first request stored", func() bool {
		_, err := calls.GetLastMsgForSubject(ctx, subjects.Calls("local"))
		return err == nil
	})
	second := Client{NC: r.env.NC, JS: r.env.JS, PubAckWait: 100 * time.Millisecond}
	res, err := second.Call(ctx, "local", req)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	first := <-firstDone
	if first.Status != subjects.CallOK || first.Duplicate {
		t.Fatalf("first call: %s %+v duplicate %v, want ok, not a duplicate", first.Status, first.Error, first.Duplicate)
	}
	if res.Status != subjects.CallOK || !res.Duplicate || string(res.Result) != string(first.Result) {
		t.Errorf("second call: %s %+v duplicate %v, want the first answer as a duplicate", res.Status, res.Error, res.Duplicate)
	}
}

// TestCallWorkerRefusalAfterResend: after a resend Call passed over an unavailable or
// rate_limited answer as the front end's "nothing stored", to be found on the results stream
// if it was the worker's. A NATS user without the JetStream API (the README's tenant users)
// never finds it there: the worker's real answer — here unavailable, a call approved after
// its server went away — was dropped and the call waited until its deadline.
func TestCallWorkerRefusalAfterResend(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, backoffInitial: time.Minute})
	// The caller's connection reaches no JetStream API (its reads are lost, as a tenant user's
	// are refused); its publishes to the calls stream go through (counted).
	var resends atomic.Int64
	p := startDropper(t, r.env.Server.Inner().Addr().String(), func(subject string, _ []byte) bool {
		if subject == subjects.Calls("local") {
			resends.Add(1)
		}
		return strings.HasPrefix(subject, "$JS.API.")
	})
	c := clientVia(t, p, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := NewCallID()
	type answer struct {
		res subjects.CallResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
		done <- answer{res, err}
	}()
	waitFor(t, "needs_approval and a resend", func() bool {
		if resends.Load() == 0 {
			return false
		}
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	// The server goes away (its connector waits a minute before reconnecting), then the call
	// is approved: the worker refuses it unavailable, stores that answer and sends it.
	r.call("local", "fixture__exit", `{}`)
	waitFor(t, "fixture unavailable", func() bool { return r.ex.reg.view.Tool("fixture", "wipe").State == "unavailable" })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	stored, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Error == nil || stored.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("stored answer %s %+v, want unavailable (the test did not test it)", stored.Status, stored.Error)
	}
	a := <-done
	if a.err != nil {
		t.Fatalf("Call: %v, want the worker's answer %s %+v", a.err, stored.Status, stored.Error)
	}
	if a.res.Status != stored.Status || a.res.Error == nil || a.res.Error.Code != subjects.CodeUnavailable {
		t.Errorf("Call: %s %+v, want %s %+v", a.res.Status, a.res.Error, stored.Status, stored.Error)
	}
}

// TestCallFrontEndTimeoutAfterResend: a front end that gets no PubAck for a request answers
// timeout ("JetStream did not acknowledge the call … may still complete"). A Call whose resend
// on the calls stream was stored meanwhile took that for its answer and returned while its
// call waited for approval and then ran: the answer it waits for comes after.
func TestCallFrontEndTimeoutAfterResend(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	id := NewCallID()
	// The executor's publishes of this call to the calls stream are lost: its front end never
	// gets a PubAck. The caller's own publish (its resend) goes through.
	p := startDropper(t, r.env.Server.Inner().Addr().String(), func(subject string, payload []byte) bool {
		return subject == subjects.Calls("local") && strings.Contains(string(payload), id)
	})
	p.drop.Store(true)
	enc, err := nats.Connect("nats://" + p.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(enc.Close)
	r.startExecutor(Config{Dispatcher: r.mgr, Relister: r.mgr}, enc)
	r.waitTool("fixture__wipe")
	// What the front end answers, seen on the inboxes.
	var gaveUp atomic.Bool
	sniff, err := r.env.NC.Subscribe("_INBOX.>", func(m *nats.Msg) {
		if strings.Contains(string(m.Data), id) && strings.Contains(string(m.Data), "JetStream did not acknowledge") {
			gaveUp.Store(true)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sniff.Unsubscribe() })

	c := Client{NC: r.env.NC, JS: r.env.JS, PubAckWait: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type answer struct {
		res subjects.CallResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
		done <- answer{res, err}
	}()
	waitFor(t, "needs_approval", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	waitFor(t, "the front end's timeout", gaveUp.Load)
	if p.dropped.Load() == 0 {
		t.Fatal("the proxy dropped nothing (the test did not test it)")
	}
	select {
	case a := <-done:
		t.Fatalf("Call returned %s %+v (%v) before its call was approved", a.res.Status, a.res.Error, a.err)
	default:
	}
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	a := <-done
	if a.err != nil || a.res.Status != subjects.CallOK || a.res.Duplicate {
		t.Errorf("Call: %s %+v duplicate %v (%v), want ok, not a duplicate", a.res.Status, a.res.Error, a.res.Duplicate, a.err)
	}
}

// heldReads is a JetStream context whose results stream reads wait until release is closed
// (reading is closed when the first one starts): a read that takes its time.
type heldReads struct {
	jetstream.JetStream
	reading, release chan struct{}
	once             *sync.Once
}

func (h heldReads) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if name == subjects.ResultsStream {
		h.once.Do(func() { close(h.reading) })
		<-h.release
	}
	return h.JetStream.Stream(ctx, name)
}

// TestCallAnswerDuringResultsRead: Call read the results stream (every 2 s) on the goroutine
// that takes its answer: an answer that came while a read was under way waited for that read
// (up to 2 s each; for a NATS user without the JetStream API every read takes that long, so
// every call over 2 s was answered up to 2 s late). It used to read on a goroutine of its own.
func TestCallAnswerDuringResultsRead(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	h := heldReads{JetStream: r.env.JS, reading: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
	t.Cleanup(func() { close(h.release) })
	c := Client{NC: r.env.NC, JS: h, PubAckWait: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := c.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("Call: %v", err)
		}
		done <- res
	}()
	<-h.reading
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case res := <-done:
		if res.Status != subjects.CallOK {
			t.Errorf("Call: %s %+v, want ok", res.Status, res.Error)
		}
	case <-ctx.Done():
		t.Fatal("Call did not take its answer while a read of the results stream was under way")
	}
}
