package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// fullWriter fails every write, as stdout on a full disk (/dev/full) does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestOutputNotWrittenIsAFailure: a command whose output could not be written (stdout on a full
// disk, or closed) exited 0 — `call` among them, --json or not: a script redirecting the result
// to a file took the empty file for the answer. `servers`, `events` and `policy` checked their
// writes; `call`, `search`, `inspect`, `approve`, `version` and `help` did not. Every command now
// fails (exit status 1, the write error on stderr) when its output was not written.
func TestOutputNotWrittenIsAFailure(t *testing.T) {
	env := natstest.Start(t)
	// An executor that answers every call with a result.
	sub, err := env.NC.Subscribe(subjects.ExecAll, func(m *nats.Msg) {
		var req subjects.CallRequest
		json.Unmarshal(m.Data, &req)
		b, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: req.ID, Tool: req.Tool, Status: subjects.CallOK,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"the answer"}]}`)})
		m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The answer reaches a writer that works: the executor above does answer.
	out, errOut, err := runCmd(t, ctx, "call", "kb__x", "--nats", env.URL)
	if err != nil || out != "the answer\n" {
		t.Fatalf("call: %q, %v\n%s", out, err, errOut)
	}
	for _, args := range [][]string{
		{"call", "kb__x", "--nats", env.URL},
		{"call", "kb__x", "--json", "--nats", env.URL},
		{"version"},
		{"help"},
		{"search", "--help"},
	} {
		var errOut bytes.Buffer
		err := run(ctx, args, fullWriter{}, &errOut)
		if exitStatus(err) != 1 || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "write") {
			t.Errorf("%v with stdout full: exit status %d (%v); want 1 and the write error", args, exitStatus(err), err)
		}
	}

	// A call whose answer came but could not be written ran: exit status 1 says the call
	// failed, so the error says it ran and how to get its answer without running it again.
	for _, args := range [][]string{
		{"call", "kb__x", "--id", "c-written-1", "--nats", env.URL},
		{"call", "kb__x", "--id", "c-written-1", "--json", "--nats", env.URL},
	} {
		var errOut bytes.Buffer
		err := run(ctx, args, fullWriter{}, &errOut)
		if exitStatus(err) != 1 || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "call --id c-written-1") {
			t.Errorf("%v with stdout full: exit status %d (%v); want 1, the write error, and how to get the answer again", args, exitStatus(err), err)
		}
	}
}
