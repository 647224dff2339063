package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestInterruptedRequestIsNotUnavailable: a client command interrupted (Ctrl-C) while it waited
// for its answer printed, with --json, code unavailable — which says NATS was not reached — and
// `approve`/`deny` the bare "context canceled", though the decision had reached an executor and
// may have been taken. Interrupted after the request went out is code timeout (given up, as
// `call` says), and approve/deny say the decision may or may not have been taken.
func TestInterruptedRequestIsNotUnavailable(t *testing.T) {
	env := natstest.Start(t)
	// A responder that takes each request and never answers; it interrupts the command
	// waiting for the answer (as Ctrl-C cancels its context) once the request arrived.
	arrived := make(chan struct{}, 1)
	for _, subj := range []string{subjects.Approvals("local", "c-int"), subjects.CatalogSearch("local")} {
		sub, err := env.NC.Subscribe(subj, func(*nats.Msg) { arrived <- struct{}{} })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ictx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		done := make(chan struct{})
		go func() {
			defer close(done)
			select {
			case <-arrived:
				interrupt()
			case <-ctx.Done():
			}
		}()
		out, errOut, err := runCmd(t, ictx, append(args, "--nats", env.URL)...)
		<-done
		if ctx.Err() != nil {
			t.Fatalf("%v: hung until the test's deadline", args)
		}
		return out, errOut, err
	}

	for _, args := range [][]string{
		{"approve", "c-int", "--json", "--wait", "1m"},
		{"deny", "c-int", "--json", "--wait", "1m"},
		{"search", "bug", "--json", "--timeout", "1m"},
	} {
		out, _, err := run(args...)
		var js struct{ Error *subjects.Error }
		if jerr := json.Unmarshal([]byte(out), &js); jerr != nil || js.Error == nil || err == nil {
			t.Fatalf("%v interrupted: %q, %v; want a JSON error and exit status 1", args, out, err)
		}
		if js.Error.Code != subjects.CodeTimeout || !strings.Contains(js.Error.Message, "interrupted") {
			t.Errorf("%v interrupted: code %s, message %q; want code timeout and a message saying it was interrupted", args, js.Error.Code, js.Error.Message)
		}
		if args[0] != "search" && !strings.Contains(js.Error.Message, "may or may not") {
			t.Errorf("%v interrupted: message %q; want it to say the decision may or may not have been taken", args, js.Error.Message)
		}
	}

	// Text: the same words on stderr, through main (the command's error).
	_, _, err := run("approve", "c-int", "--wait", "1m")
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "may or may not") {
		t.Errorf("approve interrupted: %v; want an error saying it was interrupted and the decision may or may not have been taken", err)
	}
}

// TestBadPrincipalQuotesTheValue: a malformed --principal with roles (":support", "a/:x") was
// quoted as its user part alone ("" ), which does not show what is wrong; the message quotes
// the value given.
func TestBadPrincipalQuotesTheValue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []string{":support", "acme/:support", "a/b/c:x"} {
		out, _, err := runCmd(t, ctx, "search", "bug", "--json", "--principal", p, "--nats", "nats://127.0.0.1:1")
		var js struct{ Error *subjects.Error }
		if jerr := json.Unmarshal([]byte(out), &js); jerr != nil || js.Error == nil || err == nil {
			t.Fatalf("--principal %q: %q, %v; want a JSON error", p, out, err)
		}
		if want := strconv.Quote(p); js.Error.Code != subjects.CodeBadRequest || !strings.Contains(js.Error.Message, want) {
			t.Errorf("--principal %q: %s %q; want bad_request quoting %s", p, js.Error.Code, js.Error.Message, want)
		}
	}
}
