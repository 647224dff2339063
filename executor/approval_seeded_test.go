package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// Kinds of calls of TestApprovalSeeded.
const (
	seedApprove      = iota // approved once
	seedDeny                // denied once
	seedApproveTwice        // approved, then approved again (the second is not the call's)
	seedRace                // approved and denied at once: one of them decides
	seedTimeout             // nobody decides in time (short approvalTimeoutMs), decided near or after it
	seedNoWait              // approvalTimeoutMs -1: needs_approval at once
	seedKinds
)

// seedDecision is one decision sent for a call, and what its sender was told.
type seedDecision struct {
	approve bool
	rep     subjects.ApprovalReply
	err     error
}

func (d seedDecision) String() string {
	if d.err != nil {
		return fmt.Sprintf("approve=%v: %v", d.approve, d.err)
	}
	return fmt.Sprintf("approve=%v: ok=%v %+v", d.approve, d.rep.OK, d.rep.Error)
}

// seedCall is one call of a seed.
type seedCall struct {
	kind int
	req  subjects.CallRequest
	done chan subjects.CallResult
	res  subjects.CallResult

	mu        sync.Mutex
	decisions []seedDecision
}

func (c *seedCall) decide(ctx context.Context, r *rig, approve bool) seedDecision {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, err := r.client.Decide(dctx, subjects.Approval{ID: c.req.ID, Approve: approve, By: "seeded", Reason: fmt.Sprint(approve)})
	d := seedDecision{approve: approve, rep: rep, err: err}
	c.mu.Lock()
	c.decisions = append(c.decisions, d)
	c.mu.Unlock()
	return d
}

// stoppableExecutor runs an executor that the test stops (handing its waiting calls back).
func stoppableExecutor(t *testing.T, r *rig, cfg Config, nc *nats.Conn) (ex *Executor, stop func()) {
	t.Helper()
	cfg.Log = testLogger(t).With().Str("role", "executor").Logger()
	ex, err := New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop = runUntilStopped(t, ex)
	waitFor(t, "executor ready", ex.Ready)
	waitFor(t, "ticketing__createIssue listed", func() bool { return ex.reg.lookup("ticketing__createIssue") != nil })
	return ex, stop
}

// TestApprovalSeeded mixes, per seed, calls needing approval on two executors with approvals,
// denials, decisions sent twice or racing, decisions for unknown and decided call ids, short
// approval timeouts, approvalTimeoutMs -1, resends of a call id before and after its decision,
// more waiting calls than the executors' approval-wait places and (some seeds) an executor
// stopped while calls wait. Each call gets one answer, the one its first effective decision
// says (the tool ran once when approved, never otherwise); each decider is told whether its
// decision was the call's; the audit stream records the approval once; the places are given
// back. MCPSTREAM_APPROVAL_SEEDS / _SEED0 choose the seeds.
func TestApprovalSeeded(t *testing.T) {
	t.Parallel()
	first, n := envSeeds("MCPSTREAM_APPROVAL", 3)
	r := startRig(t, rigOptions{noExecutor: true})
	var checkedMu sync.Mutex
	checkedByA := map[string]bool{}
	base := r.managerConfig(Config{Approve: []string{"ticketing__createIssue"}, Workers: 4, MaxApprovalWaits: 2})
	cfgA := base
	cfgA.hooks.approvalCheck = func(id string, seq uint64) {
		checkedMu.Lock()
		checkedByA[id] = true
		checkedMu.Unlock()
	}
	exB := r.startExecutor(base, r.env.NC)
	exA, stopA := stoppableExecutor(t, r, cfgA, r.env.Connect(t))

	// needs_approval events, per call id, as they are published.
	var waitsMu sync.Mutex
	waits := map[string]int{}
	sub, err := r.env.NC.Subscribe(subjects.Audit("local", subjects.AuditDecision), func(m *nats.Msg) {
		var ev subjects.AuditEvent
		if json.Unmarshal(m.Data, &ev) == nil && ev.Decision == subjects.CodeNeedsApproval {
			waitsMu.Lock()
			waits[ev.CallID]++
			waitsMu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	waitCount := func(id string) int {
		waitsMu.Lock()
		defer waitsMu.Unlock()
		return waits[id]
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	for seed := first; seed < first+uint64(n); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		tickets := r.ticketCount()
		calls := make([]*seedCall, 3+rng.IntN(5))
		for i := range calls {
			c := &seedCall{kind: rng.IntN(seedKinds), done: make(chan subjects.CallResult, 1)}
			c.req = subjects.CallRequest{ID: fmt.Sprintf("seed%d-%d-%s", seed, i, NewCallID()), Tool: "ticketing__createIssue",
				Arguments: json.RawMessage(fmt.Sprintf(`{"title":"seed %d call %d","body":"","priority":"low"}`, seed, i)), ApprovalTimeoutMs: 15000}
			switch c.kind {
			case seedTimeout:
				c.req.ApprovalTimeoutMs = 200 + rng.Int64N(600)
			case seedNoWait:
				c.req.ApprovalTimeoutMs = -1
			}
			calls[i] = c
		}
		stopping := exA != nil && rng.IntN(3) == 0
		t.Logf("seed %d: %d calls, stop A: %v", seed, len(calls), stopping)
		for _, c := range calls {
			go func() {
				res, err := r.client.Call(ctx, "local", c.req)
				if err != nil {
					t.Errorf("call %s: %v", c.req.ID, err)
				}
				c.done <- res
			}()
		}
		answered := func(c *seedCall) bool { return len(c.done) > 0 }
		for _, c := range calls {
			waitFor(t, "call "+c.req.ID+" waits or is answered", func() bool { return waitCount(c.req.ID) > 0 || answered(c) })
		}
		// A resend of a waiting call's id is the same request (de-duplicated): it waits once.
		for _, c := range calls {
			if rng.IntN(3) == 0 {
				if _, dup, err := r.client.Submit(ctx, "local", c.req); err != nil || !dup {
					t.Errorf("seed %d: resend of %s before its decision: duplicate %v, %v", seed, c.req.ID, dup, err)
				}
			}
		}
		// An approval naming another call id on a waiting call's subject decides neither.
		for i, c := range calls {
			if rng.IntN(3) != 0 {
				continue
			}
			other := calls[(i+1)%len(calls)]
			data, _ := json.Marshal(subjects.Approval{V: subjects.Version, ID: other.req.ID, Approve: true, By: "mismatch"})
			m, err := r.env.NC.RequestWithContext(ctx, subjects.Approvals("local", c.req.ID), data)
			if errors.Is(err, nats.ErrNoResponders) {
				continue // (not waiting: answered already)
			}
			var rep subjects.ApprovalReply
			if err == nil {
				err = json.Unmarshal(m.Data, &rep)
			}
			if err != nil || rep.OK || rep.Error == nil || rep.Error.Code != subjects.CodeBadRequest {
				t.Errorf("seed %d: approval of %s on %s's subject: %+v %v, want bad_request", seed, other.req.ID, c.req.ID, rep, err)
			}
		}
		// A decision for an unknown call id reaches nobody.
		if _, err := r.client.Decide(ctx, subjects.Approval{ID: fmt.Sprintf("seed%d-unknown", seed), Approve: true}); !errors.Is(err, ErrNoWaiter) {
			t.Errorf("seed %d: approval of an unknown call id: %v, want ErrNoWaiter", seed, err)
		}
		if stopping {
			// Decisions racing with the stop: each is the call's (told OK) or not (told the
			// call no longer waits here), and the call takes it when told OK.
			var racing sync.WaitGroup
			for _, c := range calls {
				if (c.kind == seedApprove || c.kind == seedDeny) && rng.IntN(2) == 0 {
					delay := time.Duration(rng.IntN(30)) * time.Millisecond
					racing.Go(func() {
						time.Sleep(delay)
						c.decide(ctx, r, c.kind == seedApprove)
					})
				}
			}
			stopA() // hands its waiting calls back: B takes them (or a new A)
			racing.Wait()
			exA = nil
			checkedMu.Lock()
			moved := make(map[string]bool, len(checkedByA))
			for id := range checkedByA {
				moved[id] = true
			}
			checkedMu.Unlock()
			for _, c := range calls {
				if moved[c.req.ID] && !answered(c) && c.kind != seedTimeout {
					waitFor(t, "call "+c.req.ID+" waits again or is answered", func() bool { return waitCount(c.req.ID) > 1 || answered(c) })
				}
			}
		}

		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				switch c.kind {
				case seedApprove, seedDeny:
					// Told the call no longer waits (handed back by a stopping executor): decided
					// again once it waits again.
					for range 3 {
						c.mu.Lock()
						n := len(c.decisions)
						ok := n > 0 && c.decisions[n-1].err == nil && c.decisions[n-1].rep.OK
						c.mu.Unlock()
						if ok || answered(c) {
							break
						}
						waited := waitCount(c.req.ID)
						if d := c.decide(ctx, r, c.kind == seedApprove); d.err == nil && d.rep.OK {
							break
						}
						waitFor(t, "call "+c.req.ID+" waits again or is answered", func() bool { return waitCount(c.req.ID) > waited || answered(c) })
					}
				case seedApproveTwice:
					c.decide(ctx, r, true)
					c.decide(ctx, r, rng2(seed, c.req.ID))
				case seedRace:
					var race sync.WaitGroup
					race.Go(func() { c.decide(ctx, r, true) })
					race.Go(func() { c.decide(ctx, r, false) })
					race.Wait()
				case seedTimeout:
					// Near its timeout: either the call's decision, or told it timed out.
					time.Sleep(time.Duration(c.req.ApprovalTimeoutMs-50) * time.Millisecond)
					c.decide(ctx, r, true)
				}
				c.res = <-c.done
				// Decided, expired or never waiting: nobody waits any more.
				if d := c.decide(ctx, r, true); d.err == nil && d.rep.OK {
					t.Errorf("seed %d: a decision after %s's answer was taken: %s", seed, c.req.ID, d)
				}
				// A resend after the answer gets the same answer.
				again, err := r.client.Call(ctx, "local", c.req)
				if err != nil || again.Status != c.res.Status || (again.Error == nil) != (c.res.Error == nil) || again.Error != nil && again.Error.Code != c.res.Error.Code {
					t.Errorf("seed %d: resend of %s after its answer %s %+v: %s %+v %v", seed, c.req.ID, c.res.Status, c.res.Error, again.Status, again.Error, err)
				}
			})
		}
		wg.Wait()

		ran := 0
		tally := map[string]int{}
		for _, c := range calls {
			checkSeedCall(t, r, seed, c)
			tally["answer "+c.res.Status+" "+errCode(c.res.Error)]++
			for _, d := range c.decisions {
				switch {
				case d.err != nil:
					tally["told no waiter"]++
				default:
					tally[fmt.Sprintf("told ok=%v %s", d.rep.OK, errCode(d.rep.Error))]++
				}
			}
			if c.res.Status == subjects.CallOK {
				ran++
			}
		}
		t.Logf("seed %d: %v", seed, tally)
		if got := r.ticketCount() - tickets; got != ran {
			t.Errorf("seed %d: %d tickets created, want %d (the approved calls)", seed, got, ran)
		}
		r.waitCallsSettled(ctx)
		for _, ex := range []*Executor{exA, exB} {
			if ex != nil {
				waitFor(t, "approval-wait places given back", func() bool { return len(ex.approvalWaits) == 0 })
			}
		}
		if exA == nil {
			exA, stopA = stoppableExecutor(t, r, cfgA, r.env.Connect(t))
			checkedMu.Lock()
			clear(checkedByA)
			checkedMu.Unlock()
		}
		if t.Failed() {
			t.Fatalf("seed %d failed (MCPSTREAM_APPROVAL_SEED0=%d MCPSTREAM_APPROVAL_SEEDS=1)", seed, seed)
		}
	}
}

// rng2 is a second decision of seedApproveTwice: approve again or deny, by id.
func rng2(seed uint64, id string) bool {
	return (seed+uint64(len(id))+uint64(id[len(id)-1]))%2 == 0
}

// checkSeedCall checks one call's answer against the decisions sent for it and its audit events.
func checkSeedCall(t *testing.T, r *rig, seed uint64, c *seedCall) {
	t.Helper()
	id, res := c.req.ID, c.res
	var took []seedDecision
	for _, d := range c.decisions {
		switch {
		case d.err == nil && d.rep.OK:
			took = append(took, d)
		case d.err != nil && !errors.Is(d.err, ErrNoWaiter):
			t.Errorf("seed %d %s: decision %s", seed, id, d)
		case d.err == nil && d.rep.Error == nil:
			t.Errorf("seed %d %s: decision neither ok nor an error: %s", seed, id, d)
		case d.err == nil && d.rep.Error.Code == subjects.CodeApprovalTimeout && (res.Error == nil || res.Error.Code != subjects.CodeApprovalTimeout):
			t.Errorf("seed %d %s: decider told the call timed out, its answer %s %+v", seed, id, res.Status, res.Error)
		case d.err == nil && d.rep.Error.Code != subjects.CodeNotFound && d.rep.Error.Code != subjects.CodeApprovalTimeout && d.rep.Error.Code != subjects.CodeUnavailable:
			t.Errorf("seed %d %s: decision told %s", seed, id, d)
		}
	}
	code := ""
	if res.Error != nil {
		code = res.Error.Code
	}
	switch {
	case len(took) > 1:
		t.Errorf("seed %d %s: %d decisions told they decided the call: %v", seed, id, len(took), c.decisions)
	case len(took) == 1 && took[0].approve:
		if res.Status != subjects.CallOK {
			t.Errorf("seed %d %s: approved (its approver told so), answered %s %+v", seed, id, res.Status, res.Error)
		}
	case len(took) == 1:
		if code != subjects.CodeDenied {
			t.Errorf("seed %d %s: denied (its decider told so), answered %s %+v", seed, id, res.Status, res.Error)
		}
	default:
		want := map[string]bool{subjects.CodeApprovalTimeout: true, subjects.CodeRateLimited: true}
		if c.kind == seedNoWait {
			want = map[string]bool{subjects.CodeNeedsApproval: true}
		}
		if !want[code] {
			t.Errorf("seed %d %s (kind %d): no decision taken, answered %s %+v; decisions %v", seed, id, c.kind, res.Status, res.Error, c.decisions)
		}
	}
	if c.kind != seedTimeout && code == subjects.CodeApprovalTimeout {
		t.Errorf("seed %d %s: timed out with approvalTimeoutMs %d", seed, id, c.req.ApprovalTimeoutMs)
	}
	approvedEvents, deniedEvents := 0, 0
	for _, ev := range r.auditEvents("local", id) {
		if ev.Decision == subjects.DecisionApproved {
			approvedEvents++
		}
		if ev.Decision == subjects.CodeDenied {
			deniedEvents++
		}
	}
	if wantA := res.Status == subjects.CallOK; approvedEvents != map[bool]int{true: 1}[wantA] {
		t.Errorf("seed %d %s: %d approved audit events for answer %s", seed, id, approvedEvents, res.Status)
	}
	if wantD := code == subjects.CodeDenied; deniedEvents != map[bool]int{true: 1}[wantD] {
		t.Errorf("seed %d %s: %d denied audit events for answer %s %s", seed, id, deniedEvents, res.Status, code)
	}
}

func errCode(e *subjects.Error) string {
	if e == nil {
		return ""
	}
	return e.Code
}
