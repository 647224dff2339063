package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "call",
		summary: "call a tool through the executor (policy, schema, limits, audit) and print its result",
		run:     runCall,
	})
}

const callHelp = `
Calls one tool by its public name (server__tool) through the executor, exactly as any NATS client
can: a CallRequest on mcpstream.v1.exec.<tenant>, answered with the one terminal CallResult. The
executor checks that the principal is known and may call the tool, that the tool exists and is
fresh, that the arguments match the tool's inputSchema, asks for approval when needed, applies the rate limits,
then runs tools/call with the host's credentials. ARGS_JSON is a JSON object (default {}); "-"
reads it from stdin.

Output:
  text    the result's text content (or its structuredContent as JSON when it has no text, or
          when its text is that JSON); stderr counts the blocks it leaves out (an image...)
          and says when it leaves out a structuredContent (--json shows it) other than a
          {"result": VALUE} whose VALUE the text is
  --json  the MCP result object as the server sent it (content, structuredContent, isError),
          or {"error": {"code": "...", "message": "...", ...}} when the call was refused or failed,
          also without an answer: bad_request (ARGS_JSON, --principal), unavailable (NATS
          unreachable, no executor), forbidden (NATS refused the call's subjects), timeout

Exit status: 0 when the tool ran and answered; 1 when the call was refused or failed (the error
code and message go to stderr, or stdout with --json), and 1 too when the tool reported a failure
(isError: true; its result is printed), and 1 when the answer came but could not be printed
(stdout on a full disk, say: the call ran, stderr says which --id gets its answer). A --id
already used gets the earlier answer, never a second execution: use it to retry safely. A connection to NATS lost while waiting (NATS
restarting) is said on stderr, and its return: the wait goes on (an answer sent meanwhile is
read from the results stream). Ctrl-C stops the wait, not the call: once sent it
runs, or waits for its approval (deny it to refuse it), and call --id gets its answer. When NATS
refuses this user the call's subjects (publish to mcpstream.v1.exec.<tenant>, subscribe to the
reply inbox: see --nats-inbox), call fails at once with the server's permissions violation.

Error codes: bad_request, too_large, not_found, stale, unavailable, unknown_principal, forbidden,
denied, approval_timeout, needs_approval (--approval-timeout -1), invalid_arguments (with the JSON
pointer of the failure), invalid_schema, rate_limited (with the time to retry), timeout,
result_too_large, protocol_error (also a result without the structuredContent its tool's
outputSchema asks for: the tool ran, the JSON pointer says where), outcome_unknown (the call may
have run: check before retrying).

Tools annotated destructive (and those the policy marks) wait for a human:
  mcpstream approve ID   or   mcpstream deny ID
(with --tenant T for another tenant than local). After 3s without an answer, call names its ID
and these commands on stderr.
The pending call shows in: mcpstream events --subject 'audit.>' --follow

Examples:
  mcpstream call ticketing__listIssues '{"status":"open"}'
  mcpstream call ticketing__createIssue '{"title":"Disk full","body":"db-1","priority":"high"}' --id ticket-42
  mcpstream call kb__search_knowledge_base '{"query":"refund policy","topK":3}' --json --principal acme/alice
  echo '{"level":"error","since":0}' | mcpstream call logging__getLogs - --json`

func runCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	var id string
	var timeout, wait time.Duration
	var approval approvalWait
	fs := newFlagSet("call", "call NAME [ARGS_JSON] [flags]", callHelp)
	cf.register(fs, true)
	fs.StringVar(&id, "id", "", "call id (the de-duplication key); default: a new random id")
	fs.DurationVar(&timeout, "timeout", 0, "bound of the tools/call itself (0 = the executor's default, 60s)")
	fs.Var(&approval, "approval-timeout", "how long a call may wait for approval, e.g. 10m (0 = the executor's default, 5m; -1 = do not wait)")
	fs.DurationVar(&wait, "wait", 0, "how long to wait for the answer (0 = timeout + approval timeout + 15s)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) < 1 || len(rest) > 2 {
		usageError(fs, stderr, "want a tool NAME and at most one ARGS_JSON", rest)
		return exitCode(2)
	}
	name := rest[0]
	// failed reports a call that failed without an answer: with --json as the JSON error on
	// stdout, as a refusal is (see callFailure).
	failed := func(code string, err error) error { return callFailure(stdout, cf.JSON, code, err) }
	rawArgs := "{}"
	if len(rest) == 2 {
		rawArgs = rest[1]
	}
	if rawArgs == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, subjects.MaxCallBytes+1))
		if err != nil {
			return failed(subjects.CodeBadRequest, fmt.Errorf("call: read arguments from stdin: %w", err))
		}
		if len(b) > subjects.MaxCallBytes {
			// Read no further: whatever it holds, no call request carries it (and cut short it
			// would be refused as malformed JSON, which it may well not be).
			return printCallResult(stdout, stderr, subjects.CallResult{Tool: name, Status: subjects.CallRefused, Error: &subjects.Error{
				Code:    subjects.CodeTooLarge,
				Message: fmt.Sprintf("the arguments on stdin are over %d bytes, more than a call request holds", subjects.MaxCallBytes)}}, cf.JSON)
		}
		rawArgs = string(b)
	}
	arguments := bytes.TrimSpace([]byte(rawArgs))
	if !json.Valid(arguments) || len(arguments) == 0 || arguments[0] != '{' {
		if a := bytes.TrimSpace([]byte(name)); len(rest) == 2 && len(a) > 0 && a[0] == '{' {
			return failed(subjects.CodeBadRequest, fmt.Errorf("call: want the tool NAME first, then ARGS_JSON: mcpstream call %s %s", termBlock(shellWord(rawArgs)), termBlock(shellWord(name))))
		}
		return failed(subjects.CodeBadRequest, fmt.Errorf("call: ARGS_JSON must be a JSON object, e.g. '{\"query\":\"x\"}' (got %.60q)", rawArgs))
	}
	if timeout < 0 {
		return failed(subjects.CodeBadRequest, fmt.Errorf("call: --timeout %s: must not be negative (0 = the executor's default, 60s)", timeout))
	}
	if wait < 0 {
		return failed(subjects.CodeBadRequest, fmt.Errorf("call: --wait %s: must not be negative (0 = timeout + approval timeout + 15s)", wait))
	}
	pr, err := cf.principal()
	if err != nil {
		return failed(subjects.CodeBadRequest, err)
	}
	tenant := pr.Tenant
	if tenant == "" {
		tenant = "local"
	}
	if id == "" {
		// Chosen here, not by the client library: the messages below name it (to look for its
		// answer, to approve it, to ask again without running it twice).
		id = executor.NewCallID()
	}
	req := subjects.CallRequest{ID: id, Tool: name, Arguments: json.RawMessage(arguments), Principal: pr,
		TimeoutMs: timeout.Milliseconds()}
	if timeout > 0 {
		req.TimeoutMs = max(1, req.TimeoutMs) // (0 would be the executor's default)
	}
	appr := time.Duration(approval)
	switch {
	case appr < 0:
		req.ApprovalTimeoutMs = -1
	case appr > 0:
		req.ApprovalTimeoutMs = max(1, appr.Milliseconds())
	}
	if wait <= 0 {
		wait = cmpOr(timeout, executor.DefaultCallTimeout) + cmpOr(max(appr, 0), executor.DefaultApprovalTimeout) + 15*time.Second
	}

	// NATS answers a publish or a subscription the user's permissions refuse with an
	// asynchronous error, nothing else: the request would wait for its answer until --wait.
	// Refused on this call's own subjects (the exec subject, the reply inbox), it ends now.
	denyCtx, denied, watch := cf.watchPermissions(ctx, subjects.Exec(tenant))
	defer denied(nil)
	inbox := cf.inbox()
	// A call may wait minutes (an approval): a lost connection is said on stderr, and its
	// return (the answer still comes, from the results stream).
	notes, stopNotes := cf.connectionNotes(stderr, "call")
	defer stopNotes()
	nc, js, err := cf.connect("call", watch, notes)
	if err != nil {
		return failed(subjects.CodeUnavailable, err)
	}
	defer nc.Close()
	cctx, cancel := context.WithTimeout(denyCtx, wait)
	defer cancel()
	// A call may wait minutes for a human approval: say so, with the id the approver needs.
	waited := make(chan struct{})
	hinted := make(chan struct{})
	go func() {
		defer close(hinted)
		t := time.NewTimer(callWaitingHint)
		defer t.Stop()
		select {
		case <-t.C:
			args := approveArgs(id, tenant)
			fmt.Fprintf(stderr, "mcpstream call: waiting for the answer of call %s (if it needs approval: mcpstream approve %s, or mcpstream deny %s)\n",
				termBlock(id), args, args)
		case <-waited:
		}
	}()
	// With JS the answer is also read from the results stream: one sent while this connection
	// was away (NATS restarted under a call waiting for approval) still arrives; and a request
	// lost on its way to the front end (nothing stored, nobody answers) is published again
	// straight on the calls stream after 5 s (executor.Client.Call).
	res, err := executor.Client{NC: nc, JS: js}.Call(cctx, tenant, req)
	close(waited)
	<-hinted
	switch {
	case err != nil && errors.Is(context.Cause(denyCtx), nats.ErrPermissionViolation):
		return failed(subjects.CodeForbidden, fmt.Errorf("call: NATS refused it: %w (the NATS user needs to publish to %s and to subscribe to its reply inbox %s.>, "+
			"see --nats-inbox; if the request went out, `call --id %s` again returns its answer without running it twice)",
			context.Cause(denyCtx), subjects.Exec(tenant), inbox, shellWord(req.ID)))
	case errors.Is(err, executor.ErrNoExecutor):
		// Nothing was persisted: no executor front end answered.
		res = subjects.CallResult{ID: req.ID, Tool: req.Tool, Status: subjects.CallRefused, Error: &subjects.Error{
			Code: subjects.CodeUnavailable, Message: err.Error() + " (is `mcpstream up` or `mcpstream executor` running?)"}}
	case errors.Is(err, context.DeadlineExceeded):
		// The request may be persisted: its answer will be on the results stream.
		res = subjects.CallResult{ID: req.ID, Tool: req.Tool, Status: subjects.CallFailed, Error: &subjects.Error{
			Code: subjects.CodeTimeout, Message: fmt.Sprintf("no answer within %s; the call may still complete: "+
				"`call --id %s` again returns its answer without running it twice (an operator can also see it with `mcpstream events --subject 'results.%s.%s'`)",
				wait, shellWord(req.ID), subjects.EncodeToken(tenant), subjects.EncodeToken(req.ID))}}
	case err != nil && ctx.Err() != nil:
		// Interrupted (Ctrl-C): the request may be stored, and then the call runs (once
		// approved, for one waiting for approval) whether or not this process waits for it.
		args := approveArgs(id, tenant)
		return failed(subjects.CodeTimeout, fmt.Errorf("call: interrupted before its answer; call %s may still run (once sent, it is stored, and waits for its approval or runs): "+
			"`call --id %s` again returns its answer without running it twice, and `mcpstream deny %s` refuses it while it waits for approval",
			termBlock(id), shellWord(req.ID), args))
	case err != nil:
		code := subjects.CodeUnavailable
		if errors.Is(err, context.Canceled) {
			code = subjects.CodeTimeout // given up: the call may be persisted and may still complete
		}
		return failed(code, fmt.Errorf("call: %w", err))
	}
	res.Error = cf.explain(res.Error)
	// An answer that could not be written (stdout on a full disk, say) is a failure (exit status
	// 1), but of this process, not of the call, which ran: said so, with how to get the answer
	// again, so that a script does not run the call twice for it.
	out := &outputWriter{w: stdout}
	err = printCallResult(out, stderr, res, cf.JSON)
	if werr := out.failed(); werr != nil {
		return fmt.Errorf("call: call %s was answered, but its answer was not printed: write output: %w; `call --id %s` again returns it without running it twice",
			termBlock(req.ID), werr, shellWord(req.ID))
	}
	return err
}

// callFailure reports a call that failed without an answer (bad arguments, no NATS, NATS
// refusing its subjects): with --json as {"error":{"code","message"}} on stdout and exit status
// 1, as a refused call is; else as the command's error.
func callFailure(stdout io.Writer, asJSON bool, code string, err error) error {
	if !asJSON {
		return err
	}
	return catalogFailure(stdout, true, &subjects.Error{Code: code, Message: err.Error()})
}

// approveArgs are the arguments of `mcpstream approve|deny` for call id of tenant, quoted for a
// POSIX shell (as the executor's needs_approval event quotes them) and safe for a terminal: an
// id starting with "-" after "--", so that it is not read as a flag.
func approveArgs(id, tenant string) string {
	var flag []string
	if tenant != policy.Local.Tenant {
		flag = []string{"--tenant", shellWord(tenant)}
	}
	if strings.HasPrefix(id, "-") {
		return termBlock(strings.Join(append(flag, "--", shellWord(id)), " "))
	}
	return termBlock(strings.Join(append([]string{shellWord(id)}, flag...), " "))
}

// shellWord quotes s as one word for a POSIX shell when it needs it (as it is: shellQuote also
// makes it one line).
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@/", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// callWaitingHint is how long call waits for an answer before it says what it waits for.
var callWaitingHint = 3 * time.Second

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// printCallResult prints a CallResult as `call` documents it and returns the exit status.
func printCallResult(stdout, stderr io.Writer, res subjects.CallResult, asJSON bool) error {
	if res.Error != nil || res.Status != subjects.CallOK {
		e := res.Error
		if e == nil {
			e = &subjects.Error{Code: subjects.CodeInternal, Message: "no result and no error in the answer (status " + res.Status + ")"}
		}
		if asJSON {
			b, _ := json.MarshalIndent(map[string]any{"error": e}, "", "  ")
			fmt.Fprintf(stdout, "%s\n", termSafeJSON(b))
		} else {
			fmt.Fprintf(stderr, "%s: %s\n", termBlock(e.Code), termBlock(e.Message))
			if e.Path != "" {
				fmt.Fprintf(stderr, "  path: %s\n", termBlock(e.Path))
			}
			if e.RetryAfterMs > 0 {
				fmt.Fprintf(stderr, "  retry after %s\n", time.Duration(e.RetryAfterMs)*time.Millisecond)
			}
			if e.Code == subjects.CodeOutcomeUnknown {
				fmt.Fprintf(stderr, "  the call may have run: check before retrying (same --id %s to get this answer again)\n", termBlock(shellWord(res.ID)))
			}
		}
		return exitCode(1)
	}
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
	}
	_ = json.Unmarshal(res.Result, &r)
	if asJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, res.Result, "", "  ") != nil {
			buf.Reset()
			buf.Write(res.Result)
		}
		// The server's JSON as it sent it, but safe for a terminal (the same JSON value).
		fmt.Fprintf(stdout, "%s\n", termSafeJSON(buf.Bytes()))
	} else {
		var texts []string
		for _, c := range r.Content {
			var block struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(c, &block) == nil && block.Type == "text" {
				texts = append(texts, block.Text)
			}
		}
		nonText := len(r.Content) - len(texts)
		switch {
		case len(r.StructuredContent) > 0 && !bytes.Equal(r.StructuredContent, []byte("null")) && structuredOnly(texts, r.StructuredContent):
			var buf bytes.Buffer
			if json.Indent(&buf, r.StructuredContent, "", "  ") != nil {
				buf.Reset()
				buf.Write(r.StructuredContent)
			}
			fmt.Fprintf(stdout, "%s\n", termBlock(buf.String()))
			if nonText > 0 {
				// (as beside a text: an image left out is said, on stderr)
				fmt.Fprintf(stderr, "(and %d non-text content block(s); use --json to see them)\n", nonText)
			}
		case len(texts) > 0:
			// The server's text, for a terminal: no escape sequence of its own reaches it. A
			// text that ends a line (a file's text, say) gets no empty line after it.
			text := termBlock(strings.Join(texts, "\n"))
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			fmt.Fprint(stdout, text)
			if nonText > 0 {
				// (not on stdout, which may be a file the text is written to)
				fmt.Fprintf(stderr, "(and %d non-text content block(s); use --json to see them)\n", nonText)
			}
			if len(r.StructuredContent) > 0 && !bytes.Equal(r.StructuredContent, []byte("null")) && !wrappedText(texts, r.StructuredContent) {
				// A text that is not the structured content's JSON may only sum it up (the demo
				// listIssues: "2 ticket(s) match", the tickets in structuredContent).
				fmt.Fprintln(stderr, "(and structuredContent; use --json to see it)")
			}
		case len(r.Content) > 0:
			fmt.Fprintf(stdout, "(%d non-text content block(s); use --json to see them)\n", len(r.Content))
		}
	}
	if r.IsError {
		fmt.Fprintf(stderr, "mcpstream call: %s reported a failure (isError: true)\n", res.Tool)
		return exitCode(1)
	}
	return nil
}

// structuredOnly reports whether the text content adds nothing: no text, or a text that is the
// structured content's JSON serialization (the MCP convention for structured results), in any
// layout. A text that is some other JSON (server-filesystem's read_text_file of a JSON file,
// whose structuredContent is {"content": text}) is the text to print.
func structuredOnly(texts []string, structured json.RawMessage) bool {
	if len(texts) == 0 {
		return true
	}
	if len(texts) != 1 || !strings.HasPrefix(strings.TrimSpace(texts[0]), "{") {
		return false
	}
	var text, sc any
	return json.Unmarshal([]byte(texts[0]), &text) == nil && json.Unmarshal(structured, &sc) == nil &&
		reflect.DeepEqual(text, sc)
}

// wrappedText reports whether structured is {"result": VALUE} and the texts are VALUE: what the
// MCP Python SDK answers for a tool that returns a string, a number or a list (the text is the
// value, or one text per item of a list). The text then shows all the structured content holds.
func wrappedText(texts []string, structured json.RawMessage) bool {
	var sc map[string]json.RawMessage
	if json.Unmarshal(structured, &sc) != nil || len(sc) != 1 || sc["result"] == nil {
		return false
	}
	same := func(text string, v json.RawMessage) bool {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return text == s
		}
		var a, b any
		return json.Unmarshal([]byte(text), &a) == nil && json.Unmarshal(v, &b) == nil && reflect.DeepEqual(a, b)
	}
	if len(texts) == 1 && same(texts[0], sc["result"]) {
		return true
	}
	var items []json.RawMessage
	if json.Unmarshal(sc["result"], &items) != nil || len(items) != len(texts) || len(items) == 0 {
		return false
	}
	for i, item := range items {
		if !same(texts[i], item) {
			return false
		}
	}
	return true
}

// approvalWait is --approval-timeout: a duration, or -1 (do not wait).
type approvalWait time.Duration

func (a *approvalWait) String() string {
	if *a < 0 {
		return "-1"
	}
	return time.Duration(*a).String()
}

func (a *approvalWait) Set(s string) error {
	if s == "-1" {
		*a = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		// (-1 is the one negative value: the executor refuses an approvalTimeoutMs below it,
		// and a sign typed by mistake must not mean "do not wait")
		return errors.New("want a duration (10m), 0 (the executor's default) or -1 (do not wait)")
	}
	*a = approvalWait(d)
	return nil
}
