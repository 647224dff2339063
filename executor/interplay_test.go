package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovedHandedBackWaitsForSlot: an approved call waiting for a concurrency slot is handed
// back when its executor stops (its approval record marked handed back), and its next delivery
// finds the cap still busy — the call that held it runs on. That delivery went on as approved and
// took its limits at once, so it was refused rate_limited: its approver's OK thrown away, as
// when the limits were checked after approval. It waits for the slot, as the first delivery did.
func TestApprovedHandedBackWaitsForSlot(t *testing.T) {
	h := slotWaitHandedBack(t, 5000)
	r, id, ctx, limits, hook, busy, held := h.r, h.id, h.ctx, h.limits, h.hook, h.busy, h.held

	r.startExecutor(r.managerConfig(Config{AckWait: time.Second, FrontEnd: new(bool), Limits: limits, hooks: hook}), r.env.Connect(t))
	answered := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Await(ctx, "local", id)
		if err != nil {
			t.Errorf("await: %v", err)
		}
		answered <- res
	}()
	select {
	case <-busy:
	case res := <-answered:
		t.Fatalf("the next delivery of the approved call, its slot busy, was answered %s %+v: want it to wait for the slot", res.Status, res.Error)
	}
	held.release(ctx)
	if res := <-answered; res.Status != subjects.CallOK {
		t.Errorf("the approved call handed back: %s %+v, want ok", res.Status, res.Error)
	}
	if n := r.approvalWaits(id); n != 1 {
		t.Errorf("held for approval %d times, want once", n)
	}
}

// TestDecidedElsewhereNoticesLeftClaim: an approved side-effecting call waits for a concurrency
// slot on executor A, and its progress heartbeats are lost meanwhile: JetStream delivers it again,
// to executor B, which finds the approval record approved by A's delivery and waits for that
// delivery's answer (decidedElsewhere). A's delivery gets its slot, claims, dispatches, and cannot
// store its answer: it marks its claim left. B waited on for the answer all the same, the call's
// timeout, RelistTimeout and AckWait (here past the test's limit), though the claim said that no
// answer comes. It answers from the claim: outcome_unknown, the call not run again.
func TestDecidedElsewhereNoticesLeftClaim(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	const tool = "ticketing__createIssue"
	limits := Limits{Tools: map[string]Rate{tool: {Concurrency: 1}}}
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	base := Config{AckWait: time.Second, Dispatcher: hold, Relister: r.mgr, CallTimeout: 2 * waitLimit,
		Approve: []string{tool}, Limits: limits}
	front := base
	front.NoWorkers = true
	r.startExecutor(front, r.env.NC)

	// Executor A reaches NATS through a proxy that, once set to, loses its progress heartbeats
	// and pull requests (the call delivered again goes to B) and sends its answers to a subject
	// no stream takes (storing them fails).
	px := startDropper(t, strings.TrimPrefix(r.env.URL, "nats://"), func(subject string, payload []byte) bool {
		return subject == callsPull || strings.HasPrefix(subject, "$JS.ACK.") && strings.HasPrefix(string(payload), "+WPI")
	})
	px.rename = func(subject string) (string, bool) {
		if strings.HasPrefix(subject, "mcpstream.v1.results.") {
			return "nowhere." + subject, true
		}
		return "", false
	}
	nc, err := nats.Connect("nats://"+px.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	busy := make(chan struct{}, 64)
	ca := base
	ca.Workers, ca.FrontEnd = 1, new(bool)
	ca.hooks.slotBusy = func(string) {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	r.startExecutor(ca, nc)
	r.waitTool(tool)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	other := newTestLimiter(t, r.env, Config{Limits: limits})
	held, refusal, err := other.acquire(ctx, "other", []scopeLimit{{subjects.LimitScopeTool, tool, Rate{Concurrency: 1}}})
	if err != nil || refusal != nil {
		t.Fatalf("hold the slot: %v %+v", err, refusal)
	}
	const id = "left-while-decided-elsewhere"
	req := subjects.CallRequest{ID: id, Tool: tool, Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	if _, _, err := r.client.Submit(ctx, "local", req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "needs_approval", func() bool { return r.approvalWaits(id) > 0 })
	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "ops"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the approved call did not wait for its slot")
	}
	px.drop.Store(true)

	elsewhere := make(chan struct{})
	var once sync.Once
	cb := base
	cb.Workers, cb.FrontEnd = 1, new(bool)
	cb.hooks.approvalDecided = func(got string, _ uint64, decidedElsewhere bool) {
		if got == id && decidedElsewhere {
			once.Do(func() { close(elsewhere) })
		}
	}
	r.startExecutor(cb, r.env.Connect(t))
	select {
	case <-elsewhere:
	case <-ctx.Done():
		t.Fatal("the call delivered again never found its approval decided elsewhere")
	}
	held.release(ctx) // A's delivery takes the slot, claims and dispatches
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("A's delivery never dispatched")
	}
	hold.letGo()

	res, err := r.client.Await(ctx, "local", id)
	if err != nil {
		t.Fatalf("no answer within %s (waiting for an answer from a delivery that left its claim?): %v", waitLimit, err)
	}
	if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %s %+v, want failed outcome_unknown", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}
