package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

func raceApproval(t *testing.T, a subjects.Approval) []byte {
	t.Helper()
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// An approver is told OK only when the waiting call takes its decision: the approval handler and
// the timeout (or a stop) race for the one way out of waiting, and the loser gives way. Driven
// directly, in both orders, then concurrently.
func TestApprovalWaitRace(t *testing.T) {
	c := &call{tenant: "local", req: subjects.CallRequest{ID: "c-race"}}
	approve := raceApproval(t, subjects.Approval{ID: "c-race", Approve: true, By: "ops"})

	t.Run("approval first", func(t *testing.T) {
		w := newApprovalWait(c)
		rep, ok := w.answer(approve)
		if !ok || !rep.OK || rep.Error != nil {
			t.Fatalf("first approval: %+v %v, want OK", rep, ok)
		}
		// The timeout comes next: the approver was told OK, so the call takes the decision.
		a, decided := w.giveUp(approvalExpired)
		if !decided || !a.Approve || a.By != "ops" {
			t.Fatalf("timeout after an acknowledged approval: %+v %v, want the approval", a, decided)
		}
		rep, ok = w.answer(approve)
		// not_found: no call waits (as no responders says once the waiter left, and as
		// `approve` and Client.Decide report it); it was bad_request, which is a malformed request.
		if !ok || rep.OK || rep.Error == nil || rep.Error.Code != subjects.CodeNotFound {
			t.Fatalf("second approval: %+v %v, want not_found (already decided)", rep, ok)
		}
	})
	for _, tc := range []struct {
		name  string
		state int32
		code  string
	}{
		{"timeout first", approvalExpired, subjects.CodeApprovalTimeout},
		{"hand-back first", approvalHandedBack, subjects.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newApprovalWait(c)
			if a, decided := w.giveUp(tc.state); decided {
				t.Fatalf("nobody decided, yet giving up returned %+v", a)
			}
			rep, ok := w.answer(approve)
			if !ok || rep.OK || rep.Error == nil || rep.Error.Code != tc.code {
				t.Fatalf("approval after giving up: %+v %v, want %s", rep, ok, tc.code)
			}
			select {
			case a := <-w.decided:
				t.Fatalf("a late approval was handed to the call: %+v", a)
			default:
			}
		})
	}
	t.Run("messages that decide nothing", func(t *testing.T) {
		w := newApprovalWait(c)
		if rep, ok := w.answer([]byte("{")); !ok || rep.OK || rep.Error.Code != subjects.CodeBadRequest {
			t.Errorf("bad JSON: %+v %v", rep, ok)
		}
		if rep, ok := w.answer(raceApproval(t, subjects.Approval{ID: "c-other", Approve: true})); !ok || rep.OK || rep.Error.Code != subjects.CodeBadRequest {
			t.Errorf("another id: %+v %v", rep, ok)
		}
		if rep, ok := w.answer(raceApproval(t, subjects.Approval{ID: "c-race", Tenant: "acme", Approve: true})); ok {
			t.Errorf("another tenant's approval got a reply: %+v", rep)
		}
		if a, decided := w.giveUp(approvalExpired); decided {
			t.Fatalf("the call was decided by %+v", a)
		}
	})
	t.Run("concurrently", func(t *testing.T) {
		deadline := time.Now().Add(10 * time.Second)
		var approved, expired int
		for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
			w := newApprovalWait(c)
			start := make(chan struct{})
			var rep subjects.ApprovalReply
			var decided bool
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				rep, _ = w.answer(approve)
			}()
			go func() {
				defer wg.Done()
				<-start
				_, decided = w.giveUp(approvalExpired)
			}()
			close(start)
			wg.Wait()
			switch {
			case rep.OK && !decided:
				t.Fatalf("iteration %d: approver told OK but the call timed out", i)
			case !rep.OK && decided:
				t.Fatalf("iteration %d: the call took an approval whose approver was told %+v", i, rep.Error)
			case !rep.OK && (rep.Error == nil || rep.Error.Code != subjects.CodeApprovalTimeout):
				t.Fatalf("iteration %d: approver after the timeout told %+v, want approval_timeout", i, rep.Error)
			case decided:
				approved++
			default:
				expired++
			}
		}
		t.Logf("approved %d, timed out %d", approved, expired)
	})
}

// The same race through NATS: calls wait with a 1ms approval timeout while an approval arrives
// around the deadline. Whatever wins, the approver's reply and the call's outcome agree (bounded
// in count and time; which outcome each iteration gets is not asserted on).
func TestApprovalTimeoutRace(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	tl := r.ex.reg.lookup("fixture__wipe")
	if tl == nil {
		t.Fatal("fixture__wipe is not in the registry")
	}
	deadline := time.Now().Add(15 * time.Second)
	counts := map[string]int{}
	// The approval is sent offset after the call starts waiting; the offset follows the boundary
	// between approved (later next time) and timed out (earlier next time), where the race is.
	offset := time.Millisecond
	for i := 0; i < 300 && time.Now().Before(deadline); i++ {
		id := NewCallID()
		c := &call{tenant: "local", tool: tl, req: subjects.CallRequest{ID: id, Tool: tl.Public, ApprovalTimeoutMs: 1,
			Principal: subjects.Principal{User: "local"}}}
		done := make(chan *stop, 1)
		go func() {
			s := r.ex.approval(context.Background(), c)
			r.ex.endWait(c) // (an approved call keeps its place until it has its slots: execute)
			done <- s
		}()
		time.Sleep(offset)
		// An approval sent just before the subscription ends is still answered (it is drained,
		// not dropped: 0 unanswered in 600 rounds, 23 in 300 before); the wait for the answer is
		// bounded all the same, and an answer not seen in time asserts nothing.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: true})
		cancel()
		s := <-done
		timedOut := s != nil && s.e != nil && s.e.Code == subjects.CodeApprovalTimeout
		outcome := "approved"
		if s != nil {
			outcome = fmt.Sprintf("%s %+v %v", s.status, s.e, s.err)
		}
		what := fmt.Sprintf("%s: approver got %+v %v, call ended %s", id, rep, err, outcome)
		if timedOut {
			offset = max(offset-20*time.Microsecond, 0)
		} else {
			offset = min(offset+20*time.Microsecond, 5*time.Millisecond)
		}
		switch {
		case s != nil && !timedOut:
			t.Fatalf("%s: unexpected outcome", what)
		case err == nil && rep.OK && timedOut:
			t.Fatalf("%s: approval acknowledged OK but the call timed out", what)
		case err == nil && rep.OK:
			counts["approved"]++
		case !timedOut && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("%s: the call was approved but the approver was not told OK", what)
		case !timedOut:
			counts["approved, answer not seen in time"]++
		case errors.Is(err, ErrNoWaiter):
			counts["timed out, no waiter"]++
		case errors.Is(err, context.DeadlineExceeded):
			counts["timed out, approval unanswered"]++
		case err == nil && rep.Error != nil && rep.Error.Code == subjects.CodeApprovalTimeout:
			counts["timed out, approver told approval_timeout"]++
		default:
			t.Fatalf("%s: unexpected reply", what)
		}
	}
	t.Logf("outcomes: %v (last offset %s)", counts, offset)
}
