package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestApproveNoAnswerIsNotNoWaiter: `approve` whose decision reached an executor but got no
// answer within --wait (the answer lost at a reconnect, the executor slow) said "no call is
// waiting for approval", code not_found — while the call may well have taken the decision and
// run. Only "no responders" says nobody waits; without an answer the decision's fate is
// unknown, and approve says so (code timeout) and where to look.
func TestApproveNoAnswerIsNotNoWaiter(t *testing.T) {
	env := natstest.Start(t)
	// An executor that takes the decision and whose answer never arrives.
	sub, err := env.NC.Subscribe(subjects.Approvals("local", "c-lost"), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	env.NC.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, errOut, err := runCmd(t, ctx, "approve", "c-lost", "--wait", "300ms", "--nats", env.URL)
	msg := errOut
	if err != nil {
		msg += err.Error()
	}
	if err == nil || strings.Contains(msg, "no call c-lost is waiting") || !strings.Contains(msg, "may or may not") {
		t.Errorf("approve without an answer: %v, %q; want an error saying the decision may or may not have been taken", err, msg)
	}
	out, _, _ := runCmd(t, ctx, "approve", "c-lost", "--json", "--wait", "300ms", "--nats", env.URL)
	var js struct {
		OK    bool
		Error *subjects.Error
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || js.OK || js.Error == nil || js.Error.Code != subjects.CodeTimeout {
		t.Errorf("approve --json without an answer: %q (%v), want error code timeout", out, err)
	}

	// Nobody subscribed: no call waits (not_found), as before.
	out, _, _ = runCmd(t, ctx, "deny", "c-none", "--json", "--wait", "300ms", "--nats", env.URL)
	if err := json.Unmarshal([]byte(out), &js); err != nil || js.OK || js.Error == nil || js.Error.Code != subjects.CodeNotFound {
		t.Errorf("deny --json of a call nobody holds: %q (%v), want error code not_found", out, err)
	}
}
