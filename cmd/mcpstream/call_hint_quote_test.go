package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallHintsAreCommands: the note `call` prints while it waits names the approve and deny
// commands to run, and printed the --id and tenant as they are: an id with a space or a
// shell's metacharacters (`x; touch pwned`) made a command that approves another id and runs
// the rest, one starting with "-" a flag of approve; the outcome_unknown note printed the
// answer's id raw, escape sequences included. They are quoted for a POSIX shell, as the
// executor's needs_approval event quotes them, and an id starting with "-" comes after "--".
func TestCallHintsAreCommands(t *testing.T) {
	env := natstest.Start(t)
	if _, err := env.NC.Subscribe(subjects.ExecAll, func(*nats.Msg) {}); err != nil { // never answers
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { callWaitingHint = d }(callWaitingHint)
	callWaitingHint = 100 * time.Millisecond
	for _, tc := range []struct{ id, principal, want string }{
		{"x; touch pwned", "acme corp/bob", `mcpstream approve 'x; touch pwned' --tenant 'acme corp'`},
		{"it's", "bob", `mcpstream approve 'it'\''s'`},
		{"-x", "acme/bob", `mcpstream approve --tenant acme -- -x`},
		{"c-1", "acme/bob", `mcpstream approve c-1 --tenant acme`},
		{"-y", "bob", `mcpstream approve -- -y`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, errOut, _ := runCmd(t, ctx, "call", "kb__x", "--id", tc.id, "--wait", "1s", "--principal", tc.principal, "--nats", env.URL)
		cancel()
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, strings.Replace(tc.want, "approve", "deny", 1)) {
			t.Errorf("--id %q --principal %q: stderr %q; want the commands %q (and deny)", tc.id, tc.principal, firstLine(errOut), tc.want)
		}
	}

	var out, errOut bytes.Buffer
	printCallResult(&out, &errOut, subjects.CallResult{ID: "c-1\x1b]0;pwned\x07 x", Status: subjects.CallFailed,
		Error: &subjects.Error{Code: subjects.CodeOutcomeUnknown, Message: "m"}}, false)
	if strings.ContainsAny(errOut.String(), "\x1b\x07") || !strings.Contains(errOut.String(), "same --id 'c-1 ]0;pwned  x'") {
		t.Errorf("outcome_unknown: stderr %q; want the id quoted, without its escape sequence", errOut.String())
	}
}
