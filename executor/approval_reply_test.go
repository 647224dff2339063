package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalReplyIntoOwnSubjects: an approval's reply subject, which NATS does not check, was
// answered with the executor's permissions: an approver of acme could have the answer written
// into the claims bucket under a call id of globex, whose side-effecting call with that id was
// then answered outcome_unknown without running. An approval whose reply subject is one of
// mcpstream's or the server's "$" subjects now decides nothing and is not answered.
func TestApprovalReplyIntoOwnSubjects(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "acme", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("acme", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	claim := "$KV." + subjects.InflightBucket + "." + claimKey("globex", "g-1")
	if err := r.env.NC.PublishMsg(&nats.Msg{Subject: subjects.Approvals("acme", id), Reply: claim,
		Data: []byte(`{"v":1,"id":"` + id + `","approve":false,"by":"mallory"}`)}); err != nil {
		t.Fatal(err)
	}
	// An approval after it through the same subscription: the one above was handled before.
	if m, err := r.env.NC.Request(subjects.Approvals("acme", id), []byte(`{}`), waitLimit); err != nil {
		t.Fatalf("junk approval: %v", err)
	} else if string(m.Data) == "" {
		t.Fatal("junk approval: empty answer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if e, err := r.ex.st.claims.Get(ctx, claimKey("globex", "g-1")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		if e != nil {
			t.Errorf("the approval's answer is a claim of globex's call g-1: %.80s", e.Value())
		} else {
			t.Errorf("look up the claim: %v", err)
		}
	}
	select {
	case res := <-done:
		t.Fatalf("the approval with a reply into the claims bucket decided the call: %s %+v", res.Status, res.Error)
	default:
	}
	rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Tenant: "acme", Approve: true, By: "ops"})
	if err != nil || !rep.OK {
		t.Fatalf("decide: %+v %v", rep, err)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v, want ok", res.Status, res.Error)
	}
}
