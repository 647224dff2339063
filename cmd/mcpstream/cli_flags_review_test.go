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

// TestWaitFlagsNotPositiveRefused: a --wait or --timeout that cannot be waited sent the
// request with a deadline already past. `approve ID --wait 0` sent no decision at all yet said
// that it "may or may not have been taken" (and to look in the audit stream); `search`,
// `inspect` and `servers --catalog` with a negative --timeout answered "context deadline
// exceeded", naming a NATS subject and no flag; `call --timeout -5s` went to the executor and
// came back as "timeoutMs must not be negative". Each is refused before anything is sent,
// naming the flag (usage error, exit status 2; call's as a bad_request, as its other argument
// errors).
func TestWaitFlagsNotPositiveRefused(t *testing.T) {
	env := natstest.Start(t)
	// Would an approve or deny have sent its decision?
	decisions, err := env.NC.SubscribeSync(subjects.Approvals("local", "*"))
	if err != nil {
		t.Fatal(err)
	}
	defer decisions.Unsubscribe()
	env.NC.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, args := range [][]string{
		{"approve", "c-1", "--wait", "0"},
		{"deny", "c-1", "--wait", "-1s"},
		{"search", "issue", "--timeout", "-1s"},
		{"inspect", "ticketing__createIssue", "--timeout", "-1s"},
		{"servers", "--catalog", "--timeout", "-1s"},
	} {
		flagName := args[len(args)-2]
		_, errOut, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, flagName+" "+args[len(args)-1]) {
			t.Errorf("%v: err %v, stderr %q; want exit status 2 and a message naming %s", args, err, firstLine(errOut), flagName)
		}
		if err != nil && strings.Contains(err.Error(), "may or may not") {
			t.Errorf("%v says the decision may have been taken: %v", args, err)
		}
	}
	if m, err := decisions.NextMsg(100 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("a decision was sent: %v %v", m, err)
	}

	out, _, err := runCmd(t, ctx, "call", "ticketing__listIssues", "--timeout", "-5s", "--json", "--nats", env.URL)
	var got struct{ Error *subjects.Error }
	if json.Unmarshal([]byte(out), &got) != nil || got.Error == nil || got.Error.Code != subjects.CodeBadRequest ||
		!strings.Contains(got.Error.Message, "--timeout -5s") {
		t.Errorf("call --timeout -5s --json: %v, %q; want a bad_request naming --timeout", err, out)
	}
}

// TestCallInterruptedSaysItMayRun: Ctrl-C on a `call` waiting for its answer (a destructive
// tool waiting for approval, say) ended with "call X (id ID): context canceled". The request
// was sent: the call stays stored, waits for its approval and may run after the client is gone,
// which the message did not say, nor how to get its answer or to refuse it.
func TestCallInterruptedSaysItMayRun(t *testing.T) {
	env := natstest.Start(t)
	// An executor front end that takes the request and has not answered yet.
	got := make(chan struct{}, 1)
	sub, err := env.NC.Subscribe(subjects.Exec("local"), func(*nats.Msg) { got <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	env.NC.Flush()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	go func() {
		select {
		case <-got:
			interrupt() // Ctrl-C (signalContext cancels the command's context)
		case <-time.After(30 * time.Second):
			interrupt()
		}
	}()
	_, _, err = runCmd(t, ctx, "call", "ticketing__closeIssue", `{"id":"TCK-1"}`, "--id", "c-int", "--nats", env.URL)
	if err == nil {
		t.Fatal("interrupted call: no error")
	}
	msg := err.Error()
	for _, want := range []string{"interrupted", "may still run", "call --id c-int", "mcpstream deny c-int"} {
		if !strings.Contains(msg, want) {
			t.Errorf("interrupted call: %q; want it to say %q", msg, want)
		}
	}
}

// TestUpEmbeddedStreamReplicas: `up --stream-replicas 3` without --nats (deploy/'s value,
// copied to a single machine) started the embedded server and stopped with nats-server's
// "replicas > 1 not supported in non-clustered mode", naming neither the flag nor the way out.
func TestUpEmbeddedStreamReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "up", "--stream-replicas", "3", "--data", t.TempDir(), "--nats-listen", "none", "--http-listen", "")
	if err == nil || !strings.Contains(err.Error(), "--stream-replicas 3") || !strings.Contains(err.Error(), "--nats") {
		t.Errorf("up --stream-replicas 3 with the embedded server: %v; want an error naming --stream-replicas 3 and --nats", err)
	}
}
