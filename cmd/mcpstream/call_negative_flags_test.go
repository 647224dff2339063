package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallNegativeWaitsRefused: `call --approval-timeout` documents -1 (do not wait) as its one
// negative value, and the executor refuses an approvalTimeoutMs below -1; yet any negative
// duration (-10m, a sign typed by mistake) was sent as -1, so the call was answered
// needs_approval at once. A negative --wait was taken as 0 (the default), which --help does not
// say. Both are refused before anything is sent, as a negative --timeout is.
func TestCallNegativeWaitsRefused(t *testing.T) {
	env := natstest.Start(t)
	sent, err := env.NC.SubscribeSync(subjects.Exec("local"))
	if err != nil {
		t.Fatal(err)
	}
	defer sent.Unsubscribe()
	env.NC.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, errOut, err := runCmd(t, ctx, "call", "kb__x", "--approval-timeout", "-10m", "--nats", env.URL)
	var code exitCode
	if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, "-10m") {
		t.Errorf("call --approval-timeout -10m: err %v, stderr %q; want exit status 2 naming -10m", err, firstLine(errOut))
	}
	out, _, err := runCmd(t, ctx, "call", "kb__x", "--wait", "-1s", "--json", "--nats", env.URL)
	var got struct{ Error *subjects.Error }
	if json.Unmarshal([]byte(out), &got) != nil || got.Error == nil || got.Error.Code != subjects.CodeBadRequest ||
		!strings.Contains(got.Error.Message, "--wait -1s") {
		t.Errorf("call --wait -1s --json: %v, %q; want a bad_request naming --wait", err, out)
	}
	if m, err := sent.NextMsg(100 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("a call request was sent: %v %v", m, err)
	}
	// -1 still means do not wait (review_cli_test covers its answer); 0 the default.
	var a approvalWait
	if err := a.Set("-1"); err != nil || a >= 0 {
		t.Errorf("--approval-timeout -1: %v, %v", a, err)
	}
	if err := a.Set("0"); err != nil || a != 0 {
		t.Errorf("--approval-timeout 0: %v, %v", a, err)
	}
}
