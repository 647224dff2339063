package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "approve",
		summary: "approve a call waiting for approval (needs_approval)",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runDecide(ctx, true, args, stdout, stderr)
		},
	})
	register(command{
		name:    "deny",
		summary: "deny a call waiting for approval: it ends with code denied",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runDecide(ctx, false, args, stdout, stderr)
		},
	})
}

const decideHelp = `
%[1]s one call that waits in needs_approval: a tool annotated destructive (destructiveHint: true,
unless the policy sets approveDestructive: false), or one the policy's approve patterns name. The
decision goes to the executor holding the call, on mcpstream.v1.approvals.<TENANT>.<ID> (any NATS client
may send a subjects.Approval there); %[2]s.

Waiting calls show in the audit stream, with their ID, as decision needs_approval:
  mcpstream events --subject 'audit.*.decision' --follow
(An ID holding a configured secret value shows there redacted: decide by the ID its caller sent.)

Exit status 1 when no call with that ID is waiting (already decided, timed out, or unknown),
or when no answer came within --wait (or Ctrl-C came first): the decision reached an executor
and may or may not have been taken (see the audit stream; deciding again is safe: a call decided
already answers so).

Examples:
  mcpstream %[3]s c-5f2a9e0b7c1d4e3f --reason "ticket reviewed"
  mcpstream %[3]s c-5f2a9e0b7c1d4e3f --tenant acme --by alice`

func runDecide(ctx context.Context, approve bool, args []string, stdout, stderr io.Writer) error {
	name, verb, effect := "approve", "Approves", "the call then runs"
	if !approve {
		name, verb, effect = "deny", "Denies", "the call then ends with code denied and never runs"
	}
	var cf clientFlags
	var reason, by, tenant string
	var wait time.Duration
	fs := newFlagSet(name, name+" ID [flags]", fmt.Sprintf(decideHelp, verb, effect, name))
	cf.register(fs, false)
	fs.StringVar(&reason, "reason", "", "why (recorded in the audit stream)")
	fs.StringVar(&by, "by", os.Getenv("USER"), "who decides (recorded in the audit stream)")
	fs.StringVar(&tenant, "tenant", policy.Local.Tenant, "the tenant of the call (call ids are unique per tenant)")
	fs.DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the executor's answer (more than 0)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" {
		usageError(fs, stderr, "want one call ID", rest)
		return exitCode(2)
	}
	if wait <= 0 {
		// (With a deadline already past nothing would be sent.)
		usageError(fs, stderr, fmt.Sprintf("--wait %s: want more than 0, such as 10s", wait), nil)
		return exitCode(2)
	}
	id := rest[0]
	subject := subjects.Approvals(cmp.Or(tenant, policy.Local.Tenant), id)
	wctx, stop, watch := cf.watchPermissions(ctx, subject)
	defer stop(nil)
	// A connection that failed decided nothing: with --json it is the JSON error (unavailable),
	// as every client command reports one.
	code := subjects.CodeUnavailable // (--json: the error's code)
	var rep subjects.ApprovalReply
	nc, _, err := cf.connect(name, watch)
	connected := err == nil
	if connected {
		defer nc.Close()
		cctx, cancel := context.WithTimeout(wctx, wait)
		defer cancel()
		rep, err = executor.Client{NC: nc}.Decide(cctx, subjects.Approval{ID: id, Approve: approve, Tenant: tenant, By: by, Reason: reason})
	}
	switch perr := cf.permissionsError(wctx, name, subject); {
	case !connected:
		// Nothing was sent: the connection's error (unavailable). A dial that timed out is a
		// context.DeadlineExceeded too, and no decision whose answer did not come.
	case err != nil && perr != nil:
		// Not "no call is waiting": NATS never let the decision (or its answer) through.
		err, code = perr, subjects.CodeForbidden
	case errors.Is(err, executor.ErrNoWaiter):
		err, code = fmt.Errorf("%s: no call %s is waiting for approval (already decided, timed out, or another tenant's)", name, id), subjects.CodeNotFound
	case err != nil && ctx.Err() != nil:
		// Interrupted (Ctrl-C) while waiting for the answer: the decision may have gone out
		// and been taken, as when no answer came in time (not unavailable: NATS was reached).
		err, code = fmt.Errorf("%s: interrupted before the answer about call %s: the decision may or may not have been taken; the audit stream says (mcpstream events --subject 'audit.%s.decision', approved or denied), or %s again",
			name, id, subjects.EncodeToken(cmp.Or(tenant, policy.Local.Tenant)), name), subjects.CodeTimeout
	case errors.Is(err, context.DeadlineExceeded):
		// The decision reached an executor (else NATS answers no responders at once), and its
		// answer did not come back: the call may have taken it.
		err, code = fmt.Errorf("%s: no answer about call %s within %s: the decision may or may not have been taken (its answer lost, or the executor slow); the audit stream says (mcpstream events --subject 'audit.%s.decision', approved or denied), or %s again",
			name, id, wait, subjects.EncodeToken(cmp.Or(tenant, policy.Local.Tenant)), name), subjects.CodeTimeout
	}
	if err == nil && rep.Error != nil {
		err, code = fmt.Errorf("%s %s: %s: %s", name, id, rep.Error.Code, rep.Error.Message), rep.Error.Code
	}
	if cf.JSON {
		out := map[string]any{"id": id, "ok": err == nil, "approve": approve}
		if err != nil {
			// The shape of every command's --json error: {"error":{"code","message"}}.
			out["error"] = &subjects.Error{Code: code, Message: err.Error()}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", termSafeJSON(b))
		if err != nil {
			return exitCode(1)
		}
		return nil
	}
	if err != nil {
		return err
	}
	past := "approved"
	if !approve {
		past = "denied"
	}
	fmt.Fprintf(stdout, "%s %s\n", past, id)
	return nil
}
