package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalDecidedOnAClockBehind: an approval taken by another delivery of a call (its
// executor then died before answering) is waited on by the next delivery, for that delivery's
// answer, until the call's timeout, RelistTimeout and AckWait past the decision. The decision's
// time was At, on the clock of the executor that took it: one an hour behind made the next
// delivery stop waiting at once and run the call itself, a read-only or idempotent call (not
// claimed) a second time beside the first. The wait runs from the decided record's stored
// timestamp on the NATS server's clock.
func TestApprovalDecidedOnAClockBehind(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	approve := []string{"fixture__echo"}

	// Executor A holds the call in needs_approval, then stops (handing it back).
	r.startExecutor(Config{Approve: approve, NoWorkers: true}, r.env.NC)
	a, err := New(r.env.Connect(t), r.managerConfig(Config{Approve: approve, Workers: 1, FrontEnd: new(bool), Log: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	actx, astop := context.WithCancel(context.Background())
	adone := make(chan error, 1)
	go func() { adone <- a.Run(actx) }()
	waitFor(t, "executor A ready", a.Ready)
	waitFor(t, "fixture__echo listed", func() bool { return a.reg.lookup("fixture__echo") != nil })
	id := NewCallID()
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	astop()
	if err := <-adone; err != nil {
		t.Errorf("executor A: %v", err)
	}

	// Its record as if A had taken an approval just now, its clock an hour behind, and then died
	// while running the call (no answer yet).
	editApprovalRecord(t, ctx, r, id, func(rec *approvalRecord) {
		rec.Since = rec.Since.Add(-time.Hour)
		rec.Outcome, rec.At, rec.Delivery, rec.By = outcomeApproved, time.Now().Add(-time.Hour).UTC(), 1, "ops"
	})

	elsewhere := make(chan struct{}, 1)
	cfg := r.managerConfig(Config{Approve: approve, FrontEnd: new(bool)})
	cfg.hooks.approvalDecided = func(got string, _ uint64, decidedElsewhere bool) {
		if got == id && decidedElsewhere {
			select {
			case elsewhere <- struct{}{}:
			default:
			}
		}
	}
	// B's look-ups of the call's answer (JetStream API requests naming its results subject).
	var lookups atomic.Int64
	sub, err := r.env.NC.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if (strings.Contains(m.Subject, ".MSG.GET.") || strings.Contains(m.Subject, ".DIRECT.GET.")) &&
			(strings.Contains(m.Subject, subjects.Result("local", id)) || bytes.Contains(m.Data, []byte(subjects.Result("local", id)))) {
			lookups.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	r.startExecutor(cfg, r.env.Connect(t))
	select {
	case <-elsewhere:
	case <-ctx.Done():
		t.Fatal("the call delivered again never found its approval decided")
	}
	wentOn := func() string {
		for _, ev := range r.auditEvents("local", id) {
			if strings.Contains(ev.Message, "which gave no answer") {
				return ev.Message
			}
		}
		return ""
	}
	// Waiting, it looks for the answer again (every claimWaitPoll); not waiting, it goes on.
	// Three look-ups: B's before its approval step (answered) and two waiting; a delivery that
	// does not wait looks once there, so any third comes after it went on (checked below too).
	waitFor(t, "look-ups of the answer while waiting, or the call going on as approved", func() bool { return lookups.Load() >= 3 || wentOn() != "" })
	if msg := wentOn(); msg != "" {
		t.Fatalf("the next delivery went on as approved at once (%q): the decision, taken on a clock an hour behind, counted from that clock, and the call ran twice", msg)
	}
	// A's answer comes (it was still running the call).
	data, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: id, Status: subjects.CallOK})
	if _, err := r.env.JS.Publish(ctx, subjects.Result("local", id), data); err != nil {
		t.Fatal(err)
	}
	r.waitCallsSettled(ctx)
	for _, ev := range r.auditEvents("local", id) {
		if strings.Contains(ev.Message, "which gave no answer") {
			t.Fatalf("the next delivery went on as approved at once (%q): the decision, taken on a clock an hour behind, counted from that clock, and the call ran twice", ev.Message)
		}
	}
}
