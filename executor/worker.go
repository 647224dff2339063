package executor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/suggest"
)

// Handler outcomes: a handler returns nil (ack), or an error the settle wrapper maps.
var (
	// errRetry asks for redelivery soon (nak with delay): a transient JetStream failure.
	errRetry = errors.New("retry later")
	// errTerminate drops the message for good (term): it can never be answered.
	errTerminate = errors.New("terminate")
	// errStopping hands the message back (nak after handBackDelay) because this process is
	// stopping.
	errStopping = errors.New("executor stopping")
)

// retryDelay is the nak delay of errRetry.
const retryDelay = time.Second

// handBackDelay is the nak delay of a call handed back by a stopping executor (one that waited
// for approval, or one taken while stopping). An immediate nak went straight back to the
// stopping process's own workers, still draining their pull requests, which handed it back
// again and again: each time a delivery, until MaxDeliver ended the call unanswered (or a
// restarted executor refused it internal). By the delay the stopping workers are gone and
// another executor, or this one restarted, takes the call.
const handBackDelay = 2 * time.Second

// Envelope bounds.
const (
	maxCallID   = subjects.MaxCallIDBytes
	maxToolName = 256
)

type handler func(ctx context.Context, m jetstream.Msg) error

// recoverer turns a panic in h into an answer, the worker goes on: internal, or outcome_unknown
// once tools/call was sent (the call may have run), recorded in the audit stream (a decision
// and a result event) once stored. When that answer cannot be stored the call is delivered
// again (its claim, if any, then answers outcome_unknown), not dropped.
func (e *Executor) recoverer(h handler) handler {
	return func(ctx context.Context, m jetstream.Msg) (err error) {
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				// Redacted: the panic's value may quote the call's arguments, the subject the caller's words.
				e.cfg.Log.Error().Str("panic", e.logRedacted(fmt.Sprint(p))).Str("stack", string(debug.Stack())).Str("subject", e.logRedacted(m.Subject())).Msg("call handler panicked")
				err = fmt.Errorf("%w: panic: %v", errTerminate, p)
				if tenant, terr := subjects.TenantOf(m.Subject()); terr == nil {
					if req, _ := decodeCall(m.Data()); req.ID != "" {
						fail := &subjects.Error{Code: subjects.CodeInternal, Message: "the executor failed on this call"}
						if in, _ := ctx.Value(inflightKey{}).(*inflight); in != nil && in.dispatched.Load() {
							fail = &subjects.Error{Code: subjects.CodeOutcomeUnknown, Message: "the executor failed after sending the call to its server: it may have run"}
						}
						res := refusal(tenant, req, subjects.CallFailed, fail)
						var seq uint64
						if md, merr := m.Metadata(); merr == nil {
							seq = md.Sequence.Stream
						}
						// Counted as any failed call's answer (Stats, /metrics), once stored.
						count := func() {
							if in, _ := ctx.Value(inflightKey{}).(*inflight); in != nil && in.call != nil && !in.call.started.IsZero() {
								start = in.call.started
							}
							e.stats.answered.Add(1)
							e.stats.nanos.Add(int64(time.Since(start)))
							e.stats.failed.Add(1)
						}
						if aerr := e.answerFor(context.WithoutCancel(ctx), seq, res, e.replyTo(m), count); aerr == nil {
							err = nil
							// Recorded as any answer: the audit stream said nothing of how the
							// call ended, as if it still ran. Named as the call's other events
							// name it (the principal the policy resolved, the tool's server)
							// once process had built it.
							ac := &call{tenant: tenant, req: req}
							if in, _ := ctx.Value(inflightKey{}).(*inflight); in != nil && in.call != nil {
								ac = in.call
							}
							e.audit.emit(subjects.AuditDecision, ac.audit(subjects.AuditEvent{Decision: fail.Code, Code: fail.Code, Message: fail.Message}))
							e.audit.emit(subjects.AuditResult, ac.audit(subjects.AuditEvent{Decision: res.Status, Code: fail.Code, Message: fail.Message}))
						} else {
							err = fmt.Errorf("%w: panic: %v; answer: %w", errRetry, p, aerr)
						}
					}
				}
			}
		}()
		return h(ctx, m)
	}
}

// handle runs one call message through the middleware and settles it.
func (e *Executor) handle(m jetstream.Msg) {
	e.stats.handled.Add(1)
	in := e.flight.add(m)
	defer e.flight.remove(in)
	ctx := context.WithValue(context.Background(), inflightKey{}, in)
	err := e.recoverer(e.process)(ctx, m)
	if err != nil {
		e.leaveClaim(in)
	}
	e.settle(m, err)
}

// settle is the one place that decides ack, nak or term.
func (e *Executor) settle(m jetstream.Msg, err error) {
	switch {
	case err == nil:
		if aerr := m.Ack(); aerr != nil {
			e.cfg.Log.Debug().Err(aerr).Msg("ack")
		}
	case errors.Is(err, errTerminate):
		// (The subject and the error may quote a caller's words: a bad tenant token, an id.)
		e.cfg.Log.Warn().Str("error", e.logRedacted(err.Error())).Str("subject", e.logRedacted(m.Subject())).Msg("call message dropped")
		m.Term()
	case errors.Is(err, errStopping):
		m.NakWithDelay(handBackDelay)
	default:
		// (Redacted as above: the subject's tenant token is the caller's words.)
		e.cfg.Log.Warn().Str("error", e.logRedacted(err.Error())).Str("subject", e.logRedacted(m.Subject())).Msg("call will be redelivered")
		m.NakWithDelay(retryDelay)
	}
}

type inflightKey struct{}

// decodeCall decodes and checks a call envelope. The request is returned as far as it could be
// read (its ID, when known, lets the refusal reach the caller).
func decodeCall(data []byte) (subjects.CallRequest, *subjects.Error) {
	var req subjects.CallRequest
	if err := subjects.Decode(data, &req); err != nil {
		var head struct {
			ID string `json:"id"`
		}
		// (json.Unmarshal fills what it could decode before it failed: req.ID may be set. An
		// id named twice, or also as "ID", names no call to answer to.)
		req.ID = ""
		if subjects.Decode(data, &head) == nil && len(head.ID) <= maxCallID {
			// Bounded as a valid request's id: the refusal's results subject and claim key
			// are built from it, and past a NATS control line the server closes the
			// connection that publishes one. A longer id is no id to answer to.
			req.ID = head.ID
		}
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: "call request is not a valid CallRequest JSON object: " + truncateString(err.Error(), 200)}
	}
	switch {
	case req.V != 0 && req.V != subjects.Version:
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("unsupported version v=%d (this executor speaks v=%d)", req.V, subjects.Version)}
	case req.ID == "":
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: "id is required: a caller-chosen call id, unique per tenant"}
	case len(req.ID) > maxCallID:
		id := req.ID
		req.ID = ""
		// (The "…" inside the quotes, right where the id was cut: a secret value that
		// straddled the cut is redacted from the message, see auditor.emitOn.)
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("id is %d bytes long; at most %d (%q)", len(id), maxCallID, truncateString(id, 20))}
	case req.Tool == "":
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: "tool is required: the public name server__tool"}
	case len(req.Tool) > maxToolName:
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("tool name is %d bytes long; at most %d", len(req.Tool), maxToolName)}
	case req.TimeoutMs < 0:
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: "timeoutMs must not be negative"}
	case req.ApprovalTimeoutMs < -1:
		return req, &subjects.Error{Code: subjects.CodeBadRequest, Message: "approvalTimeoutMs must be -1 (do not wait), 0 (default) or positive"}
	}
	if bad := req.Principal.Check(); bad != nil {
		return req, bad
	}
	return req, nil
}

// refusal is the terminal answer of a call that ends with err.
func refusal(tenant string, req subjects.CallRequest, status string, err *subjects.Error) subjects.CallResult {
	now := time.Now().UTC()
	return subjects.CallResult{V: subjects.Version, ID: req.ID, Tenant: tenant, Tool: req.Tool, Status: status, Error: err, StartedAt: now, FinishedAt: now}
}

// call is the state of one call through the pipeline.
type call struct {
	tenant  string
	replyTo string // where the answer also goes (subjects.HeaderReplyTo), "" for nowhere
	req     subjects.CallRequest
	tool    *tool
	pr      subjects.Principal
	started time.Time
	attempt int
	// looked: the results stream was searched for an earlier answer of this call id (a
	// redelivery, or a call whose re-run would not be harmless): there was none.
	looked bool
	// redelivered: this request was delivered before (its worker died, or handed it back).
	redelivered bool
	// seq is the request's calls stream sequence: what tells its own claim from the claim of
	// another request of the same call id.
	seq uint64
	// delivery is this delivery's number (NumDelivered): what tells two deliveries of one
	// request apart in the call's approval record.
	delivery uint64
	// withheld is the server's result of a call answered protocol_error because it fails the
	// tool's outputSchema, or because its connector refused it for its shape
	// (DispatchReply.Withheld): not in the answer, kept in the audit result event.
	withheld json.RawMessage
	// unchecked says why a result was passed on without checking it against the outputSchema
	// (for the audit result event).
	unchecked string
	// ratesTaken: the call counted against its rates before it was asked to be approved
	// (admit); counted is what it added, given back if it does not run (giveBackRates) until
	// its lease holds it (execute).
	ratesTaken bool
	counted    []increment
	// approved: the call needed approval and goes on approved (its own decision, or one an
	// earlier delivery took): a busy concurrency cap is waited for (slotsWhenFree).
	approved bool
	// approvedDef is the definitionDigest of the tool definition the call was approved under
	// ("" when not known: an approval record written by an older executor).
	approvedDef string
	// slotWaited is how long the approved call waited for a concurrency slot (slotsWhenFree),
	// and before it for the registry replay (since approvedAt): its dispatch has that much less
	// of its timeout.
	slotWaited time.Duration
	// approvedAt: when the call, approved, began to wait for the registry replay (admit); zero
	// when it did not.
	approvedAt time.Time
	// reached: a dispatch of the call may have reached its server (anything but a connector's
	// "nothing was sent", see neverSent): it counts against its limits whatever the answer.
	reached bool
	// waitPlace: the call holds a place among the calls waiting in this process
	// (Config.MaxApprovalWaits), from its approval wait until it has its concurrency slots;
	// given back with endWait.
	waitPlace bool
}

// giveBackRates gives back the rate counts c took before its approval and holds still: it does
// not run (refused, denied, timed out, handed back, or answered from another request).
func (e *Executor) giveBackRates(c *call) {
	e.lim.giveBack(c.counted)
	c.counted = nil
}

func (c *call) audit(ev subjects.AuditEvent) subjects.AuditEvent {
	ev.CallID, ev.Tenant, ev.Tool = c.req.ID, c.tenant, c.req.Tool
	ev.User, ev.Roles = c.req.Principal.User, c.req.Principal.Roles
	if c.pr.User != "" {
		ev.User, ev.Roles = c.pr.User, c.pr.Roles
	}
	if c.tool != nil {
		ev.Server = c.tool.Server
	}
	return ev
}

// process is the call handler: every step of the pipeline, then the one terminal answer.
func (e *Executor) process(ctx context.Context, m jetstream.Msg) error {
	tenant, err := subjects.TenantOf(m.Subject())
	if err != nil {
		// No answer can be stored (the results subject needs the tenant): the audit stream keeps
		// the evidence, under the token no tenant has, and a caller's inbox (HeaderReplyTo) is
		// told, as the exec subject tells its caller.
		req, _ := decodeCall(m.Data())
		c := &call{req: req, started: time.Now().UTC(), replyTo: e.replyTo(m)}
		args, n, trunc := e.audit.payload(m.Data())
		msg := "no valid tenant token in the subject " + truncateString(m.Subject(), 300)
		if errors.Is(err, subjects.ErrSubjectTokens) {
			// The stream captures calls.>: more tokens after the tenant's make no call of it.
			msg = "the subject " + truncateString(m.Subject(), 300) + " is not " + subjects.Root + ".calls.<tenant>: extra tokens after the tenant are refused"
		}
		e.audit.emitOn(subjects.AuditNoTenant(subjects.AuditRequest), subjects.AuditRequest, c.audit(subjects.AuditEvent{Arguments: args, ArgBytes: n, Truncated: trunc, Message: msg}))
		e.audit.emitOn(subjects.AuditNoTenant(subjects.AuditDecision), subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.CodeBadRequest, Code: subjects.CodeBadRequest, Message: msg}))
		e.reply(c.replyTo, refusal("", req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeBadRequest, Message: msg}))
		return fmt.Errorf("%w: %w", errTerminate, err)
	}
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("%w: %w", errTerminate, err)
	}
	req, bad := decodeCall(m.Data())
	c := &call{tenant: tenant, req: req, started: time.Now().UTC(), replyTo: e.replyTo(m), redelivered: md.NumDelivered > 1, seq: md.Sequence.Stream, delivery: md.NumDelivered}
	if in, _ := ctx.Value(inflightKey{}).(*inflight); in != nil {
		in.call = c // (for recoverer: the same goroutine)
	}
	defer e.giveBackRates(c) // (whatever ends the call, a panic included: each only once)
	defer e.endWait(c)
	if bad != nil {
		args, n, trunc := e.audit.payload(m.Data())
		e.audit.emit(subjects.AuditRequest, c.audit(subjects.AuditEvent{Arguments: args, ArgBytes: n, Truncated: trunc}))
		if req.ID == "" {
			// No results subject to store the answer on: the audit stream keeps the evidence,
			// and a caller's inbox (HeaderReplyTo) is told, as the exec subject tells its caller.
			e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: bad.Code, Code: bad.Code, Message: bad.Message}))
			e.reply(c.replyTo, refusal(tenant, req, subjects.CallRefused, bad))
			return fmt.Errorf("%w: %s", errTerminate, bad.Message)
		}
		return e.refuse(ctx, c, subjects.CallRefused, bad)
	}

	// A redelivered call (its worker crashed, or its answer's ack was lost) may have an answer
	// already: that is the answer, the call never runs again. A first delivery needs no look-up:
	// the calls stream de-duplicates resends by id for its window, and after it the claim of a
	// side-effecting call still finds the earlier answer (see execute).
	if md.NumDelivered > 1 {
		if done, err := e.answered(ctx, c); done || err != nil {
			return err
		}
	}

	args, n, trunc := e.audit.payload(req.Arguments)
	e.audit.emit(subjects.AuditRequest, c.audit(subjects.AuditEvent{Arguments: args, ArgBytes: n, Truncated: trunc}))

	if int(md.NumDelivered) >= e.cfg.MaxDeliver && md.NumDelivered > 1 {
		return e.lastDelivery(ctx, c, md.NumDelivered)
	}

	if rerr := e.admit(ctx, c); rerr != nil {
		e.giveBackRates(c)
		e.endWait(c)
		if errors.Is(rerr.err, errStopping) {
			return errStopping
		}
		if rerr.err != nil || rerr.done {
			return rerr.err
		}
		if rerr.replyOnly {
			return e.refuseReplyOnly(c, rerr.status, rerr.e)
		}
		return e.refuse(ctx, c, rerr.status, rerr.e)
	}
	return e.execute(ctx, c)
}

// answered looks for an earlier answer of c's call id in the results stream and, if there is
// one, sends it to c's caller (who may still wait for it: the worker that stored it died before
// replying, or this is a resend after the calls stream's de-duplication window) and reports
// true: that is the call's one answer, it never runs again.
func (e *Executor) answered(ctx context.Context, c *call) (bool, error) {
	if c.looked {
		return false, nil
	}
	prev, ok, err := e.lookupResult(ctx, c.tenant, c.req.ID)
	if err != nil {
		return false, fmt.Errorf("%w: look up result: %w", errRetry, err)
	}
	c.looked = true
	if ok {
		// Published on its results subject again too, for callers that watch it rather than
		// wait (never stored again: the results stream keeps its one answer; see answer).
		prev.Duplicate = true
		if err := e.answerFor(ctx, c.seq, prev, c.replyTo, nil); err != nil {
			return false, fmt.Errorf("%w: %w", errRetry, err)
		}
		if c.redelivered {
			// The worker that stored this answer may have died before its audit result event
			// was stored (audit events are published after the answer, and the call is
			// acknowledged after both): record it again, at least once (it may appear twice).
			ev := subjects.AuditEvent{Decision: prev.Status, IsError: isToolError(prev.Result)}
			if prev.Error != nil {
				ev.Code, ev.Message = prev.Error.Code, prev.Error.Message
			}
			if len(prev.Result) > 0 {
				ev.Result, ev.ResBytes, ev.Truncated = e.audit.resultPayload(prev.Result)
			}
			e.audit.emit(subjects.AuditResult, c.audit(ev))
		}
	}
	return ok, nil
}

// stop is why the pipeline stopped a call: a refusal to answer, or an error for settle.
type stop struct {
	status string
	e      *subjects.Error
	err    error
	done   bool // answered already (see answered): nothing more to do
	// replyOnly: the refusal is not the call id's answer (another request of the id may still
	// give that): sent to this request's caller only, never stored (see refuseReplyOnly).
	replyOnly bool
}

func refused(code, msg string) *stop {
	return &stop{status: subjects.CallRefused, e: &subjects.Error{Code: code, Message: msg}}
}

// admit runs the checks before dispatch, in order: principal, resolve, policy, freshness (then
// the policy again on the definition it leaves), arguments, rates and approval (then freshness
// again); limits are taken in execute, only the concurrency slots for a call that took its rates
// before approval. The principal and the policy come first: a principal the policy
// does not know, or one that may not call the tool, learns nothing of its state and makes no
// re-list of its server.
func (e *Executor) admit(ctx context.Context, c *call) *stop {
	// 1. The principal.
	pr := c.req.Principal
	if pr.Tenant != "" && pr.Tenant != c.tenant {
		return refused(subjects.CodeBadRequest, fmt.Sprintf("principal.tenant %q differs from the tenant of the subject (%q): the subject decides", pr.Tenant, c.tenant))
	}
	pr.Tenant = c.tenant
	rp, err := e.cfg.Policy.Resolve(pr)
	if err != nil {
		return refused(subjects.CodeUnknownPrincipal, err.Error())
	}
	if rp.Tenant != c.tenant {
		// Which tenant the user belongs to is not said, nor that it is one: a publisher on one
		// tenant's subjects learns nothing of another tenant's users (the words of a name
		// nobody configures).
		return refused(subjects.CodeUnknownPrincipal, policy.NotInTenant(rp.User, c.tenant).Error())
	}
	c.pr = rp

	// 2. Resolve the public name, in a view that holds what the registry stream holds (not part
	// way through a replay: see registry.caughtUp), waited for at most the call's timeout.
	wctx, cancel := context.WithDeadline(ctx, c.started.Add(requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout)))
	err = e.reg.caughtUp(wctx, e.stopping)
	cancel()
	switch {
	case errors.Is(err, errStopping):
		return &stop{err: errStopping} // handed back: another executor waits for it
	case err != nil:
		return refused(subjects.CodeUnavailable, "the executor is replaying the registry stream (purged, or created again) and did not catch up within the call's timeout")
	}
	t := e.reg.lookup(c.req.Tool)
	if t == nil {
		if server, name, ok := subjects.SplitPlain(c.req.Tool); ok && e.cfg.Policy.Decide(rp, policy.Tool{Server: server, Name: name}).Allowed {
			// (Only of a list rp may see: one private to another context is not there for it,
			// as its kept tools are not. Nor, when the server holds no tools list, of a server
			// whose every list is private to another context: the catalog hides it from rp.)
			mayUse := func(scope, authContext string) bool { return e.cfg.Policy.MayUseScope(rp, scope, authContext) }
			if v := e.reg.view.Tool(server, name); v.State == staleness.Unavailable && mayUse(v.CacheScope, v.AuthContext) &&
				e.reg.view.MayUseAList(server, mayUse) {
				s := refused(subjects.CodeUnavailable, c.req.Tool+" is unavailable: "+v.Reason)
				s.e.Reason = v.Reason
				return s
			}
		}
		return e.notFound(rp, c.req.Tool)
	}
	c.tool = t

	// 3. Policy on the definition held: the tool, then the list's cache scope.
	if _, s := e.authorize(rp, t, e.reg.view.Tool(t.Server, t.Name), ""); s != nil {
		return s
	}

	// 4. Freshness, then the policy again: a re-list may have replaced the definition or the
	// list's scope.
	v, t, s := e.fresh(ctx, t)
	if s != nil && s.e != nil && s.e.Code == subjects.CodeUnavailable {
		switch e.awaitReconnect(ctx, c, t.Server) {
		case reconnected:
			v, t, s = e.fresh(ctx, t)
		case reconnectStopping:
			return &stop{err: errStopping} // handed back: another executor waits for it
		}
	}
	if s != nil {
		return e.hidden(rp, t, v, s)
	}
	c.tool = t
	d, s := e.authorize(rp, t, v, "")
	if s != nil {
		return s
	}

	// 5. Arguments against the real inputSchema (before any human is asked to approve).
	if verr := e.validateArguments(ctx, c, t); verr != nil {
		return &stop{status: subjects.CallRefused, e: verr}
	}

	// 6. Approval. A resend of an answered call after the calls stream's de-duplication window
	// gets that answer; nobody is asked to approve it again. Nor a claimed call: approved and
	// dispatched before (its executor died before recording the result), or a resend while
	// another request of its id runs. It never runs again whatever an approver decides: it is
	// answered from its claim (the holder's answer, or outcome_unknown).
	//
	// The rates are taken before anyone is asked: an approver was told OK for calls then
	// refused rate_limited (a human's decision thrown away, the caller to retry and an approver
	// to approve again). A call that then does not run gives its counts back (see process). A
	// call delivered again takes them after approval, in execute: its first delivery gave them
	// back when it handed the call back, or may still wait (heartbeats lost), and a refusal
	// stored now would be the answer of a call that delivery may still run.
	if d.NeedsApproval || e.configuredApproval(t) {
		if done, err := e.answered(ctx, c); done || err != nil {
			return &stop{err: err, done: done}
		}
		if s := e.fromClaim(ctx, c); s != nil {
			return s
		}
		if !c.redelivered && c.req.ApprovalTimeoutMs >= 0 { // (-1: refused needs_approval at once)
			counted, limited, err := e.lim.acquireRates(ctx, e.cfg.Limits.limitsFor(c.tenant, t))
			if err != nil {
				return refused(subjects.CodeUnavailable, "limits cannot be checked: "+err.Error())
			}
			if limited != nil {
				return &stop{status: subjects.CallRefused, e: limited}
			}
			c.ratesTaken, c.counted = true, counted
		}
		if s := e.approval(ctx, c); s != nil {
			return s
		}
		c.approved = true
		if s := e.approvedCaughtUp(ctx, c); s != nil {
			return s
		}
		nv, nt, s := e.fresh(ctx, t)
		if s != nil && errors.Is(s.err, errStopping) {
			e.handBackApproved(c) // (its re-list waited for a replay: see approvedCaughtUp)
			return s
		}
		if s != nil {
			return e.hidden(rp, nt, nv, s)
		}
		if nt.definitionDigest() != cmp.Or(c.approvedDef, t.definitionDigest()) {
			// The approver decided on the call as listed then (another inputSchema, other
			// hints): it does not run under a definition nobody approved, re-listed while it
			// waited, or before this delivery of an approval another one took.
			s := refused(subjects.CodeStale, nt.Public+" was listed again, otherwise (schemas, hints), since the call was asked to be approved: it was approved as listed before; nothing was sent; send it again with a new call id to have it approved as listed now")
			s.e.Reason = "re-listed"
			return s
		}
		if nt != t {
			// Re-listed while waiting, with the same definition (a new list): the policy and the
			// cache scope are checked again against it (the list may be private to another
			// context now), and the arguments.
			c.tool = nt
			if _, s := e.authorize(rp, nt, nv, " as re-listed while it waited for approval"); s != nil {
				return s
			}
			if verr := e.validateArguments(ctx, c, nt); verr != nil {
				return &stop{status: subjects.CallRefused, e: verr}
			}
		}
		return nil
	}
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.DecisionAllowed, Message: d.Why}))
	return nil
}

// approvedCaughtUp waits, for an approved call, until the registry view holds what the stream
// holds (see registry.caughtUp), at most the call's timeout (which runs from its approval),
// before its tool is read again: a stream purged while it waited for its approver is replayed,
// and a view part way through would refuse it not_found (its server's list not replayed yet),
// the approver's OK thrown away, or admit it under a tool since revoked. The executor stopping
// hands it back, marked so that its next delivery goes on as approved at once.
func (e *Executor) approvedCaughtUp(ctx context.Context, c *call) *stop {
	c.approvedAt = time.Now()
	wctx, cancel := context.WithTimeout(ctx, requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout))
	defer cancel()
	switch err := e.reg.caughtUp(wctx, e.stopping); {
	case errors.Is(err, errStopping):
		e.handBackApproved(c)
		return &stop{err: errStopping}
	case err != nil:
		return refused(subjects.CodeUnavailable, "the executor is replaying the registry stream (purged, or created again) and did not catch up within the call's timeout")
	}
	return nil
}

// notFound is the refusal of a call of name, a tool that no server lists or that rp may not
// see, with the names rp may call that it probably meant (the same answer either way: the
// suggestions never include name itself).
func (e *Executor) notFound(rp subjects.Principal, name string) *stop {
	msg := "no tool " + name + " is listed by any connected server"
	if q := suggest.DidYouMean(e.reg.suggestions(name, func(t *tool) bool { return e.mayOffer(rp, t) })); q != "" {
		msg += "; " + q
	}
	return refused(subjects.CodeNotFound, msg)
}

// mayOffer reports whether a not_found answer to rp may name t (see registry.suggestions): a
// listed tool a call would take, fresh or expired (re-listed first; not stale, unavailable,
// revoked or removed: refused), in a list rp may see, that the policy lets rp call. Anything
// else is never named, so an answer tells no more than the principal's own search would.
func (e *Executor) mayOffer(rp subjects.Principal, t *tool) bool {
	v := e.reg.view.Tool(t.Server, t.Name)
	if !v.State.Usable() {
		return false
	}
	if !e.cfg.Policy.MayUseScope(rp, v.CacheScope, v.AuthContext) {
		return false
	}
	return e.cfg.Policy.Decide(rp, policy.Tool{Server: t.Server, Name: t.Name, Destructive: t.Destructive}).Allowed
}

// authorize asks the policy whether rp may call t, listed as v says (its cache scope); when
// not, it returns the refusal, forbidden (when says when the decision was made, for the message).
func (e *Executor) authorize(rp subjects.Principal, t *tool, v staleness.Verdict, when string) (policy.Decision, *stop) {
	if !e.cfg.Policy.MayUseScope(rp, v.CacheScope, v.AuthContext) {
		// Invisible to this principal, as in the catalog: answered as a tool nobody lists (and
		// before the policy, whose forbidden would say it exists), so that another context's
		// private list is not confirmed to exist.
		return policy.Decision{}, e.notFound(rp, t.Public)
	}
	d := e.cfg.Policy.Decide(rp, policy.Tool{Server: t.Server, Name: t.Name, Destructive: t.Destructive})
	if !d.Allowed {
		return d, refused(subjects.CodeForbidden, fmt.Sprintf("%s may not call %s%s (%s)", rp.User, t.Public, when, d.Why))
	}
	return d, nil
}

// hidden is s, a refusal of t by its freshness (stale, unavailable), unless its list as v says
// it stands now is one rp may not see (re-listed private to another context since authorize
// looked): not_found then, as authorize answers, not the list's state and its server's reason.
func (e *Executor) hidden(rp subjects.Principal, t *tool, v staleness.Verdict, s *stop) *stop {
	if s.e != nil && !e.cfg.Policy.MayUseScope(rp, v.CacheScope, v.AuthContext) {
		return e.notFound(rp, t.Public)
	}
	return s
}

func (e *Executor) configuredApproval(t *tool) bool {
	for _, p := range e.cfg.Approve {
		if policy.MatchTool(p, t.Server, t.Name) {
			return true
		}
	}
	return false
}

// awaitReconnect waits, in the executor's first ReconnectGrace and at most the call's timeout,
// for server to be ready when its last status says it is coming back: connecting, or its
// connector stopped or fell silent (a restart). After a restart the calls queued while
// everything was down are taken before the connectors are back; refusing them unavailable
// would throw away what the queue kept for them. A server that failed otherwise (connect_failed,
// a crash loop) is not waited for. It reports whether the server is ready now, or the
// executor is stopping.
func (e *Executor) awaitReconnect(ctx context.Context, c *call, server string) reconnect {
	if e.cfg.ReconnectGrace <= 0 {
		return notReconnected
	}
	until := time.Unix(0, e.serving.Load()).Add(e.cfg.ReconnectGrace)
	until = minTime(until, c.started.Add(requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout)))
	if !time.Now().Before(until) {
		return notReconnected
	}
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	poll := time.NewTicker(reconnectPoll)
	defer poll.Stop()
	for {
		status, code, _ := e.reg.view.ServerStatus(server)
		switch {
		case status == subjects.StatusReady:
			return reconnected
		case status == subjects.StatusConnecting,
			status == subjects.StatusUnavailable && (code == subjects.CodeConnectorStopped || code == subjects.CodeConnectorLost):
		default:
			return notReconnected
		}
		select {
		case <-poll.C:
		case <-deadline.C:
			return notReconnected
		case <-e.stopping:
			return reconnectStopping
		case <-ctx.Done():
			return reconnectStopping
		}
	}
}

// reconnect is the outcome of awaitReconnect.
type reconnect int

const (
	notReconnected reconnect = iota
	reconnected
	reconnectStopping
)

// reconnectPoll is how often awaitReconnect looks at the server's status.
const reconnectPoll = 50 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fresh checks the freshness of t: stale, removed and revoked tools are refused stale; a server
// that is not ready unavailable; an expired list is re-listed first. It returns the tool's
// current definition (a re-list may have replaced it).
func (e *Executor) fresh(ctx context.Context, t *tool) (staleness.Verdict, *tool, *stop) {
	v := e.reg.view.Tool(t.Server, t.Name)
	var retryAfterMs int64 // the re-list's, when its server asked to be left alone a while
	if v.State == staleness.Expired {
		var err error
		if v, retryAfterMs, err = e.revalidate(ctx, t); err != nil {
			return v, t, &stop{err: err} // (errStopping: handed back)
		}
	}
	// The definition held now: a re-list (for the TTL, or by the server while the call waited
	// for approval) may have replaced it.
	if nt := e.reg.lookup(t.Public); nt != nil {
		t = nt
	}
	if t.removed && v.State.Usable() {
		// Removed since the view was read: the table keeps no definition of it. Its verdict
		// now, read with the entry.
		var nt *tool
		if v, nt = e.reg.held(t); nt != nil {
			t = nt
		}
	}
	switch v.State {
	case staleness.Fresh:
		return v, t, nil
	case staleness.Stale, staleness.Removed, staleness.Revoked:
		s := refused(subjects.CodeStale, t.Public+" is "+string(v.State)+": "+v.Reason)
		s.e.Reason = v.Reason
		return v, t, s
	case staleness.Unknown:
		return v, t, refused(subjects.CodeNotFound, t.Public+": "+v.Reason)
	default: // Unavailable, and Expired after a failed re-list
		s := refused(subjects.CodeUnavailable, t.Public+" is unavailable: "+v.Reason)
		s.e.Reason = v.Reason
		s.e.RetryAfterMs = retryAfterMs
		return v, t, s
	}
}

// revalidate re-lists the tools of t's server and returns the verdict after it, and the
// re-list's retryAfterMs when it failed with one (its server answered HTTP 429 or 503 with a
// Retry-After, now or earlier: the connector does not ask it again before then). It returns
// errStopping when the executor stops while the call waits for the re-list's snapshot to be
// applied or for a replay to catch up: the call, at admission, is handed back, as one waiting
// for the replay before its freshness is (admit).
func (e *Executor) revalidate(ctx context.Context, t *tool) (staleness.Verdict, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RelistTimeout)
	defer cancel()
	rep := e.relists.do(t.Server, func() relisted {
		asked, gen := time.Now(), e.reg.generation() // (the stream its sequence is of)
		rep := e.relist.Relist(ctx, t.Server, subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools, Why: "ttl expired before a call of " + t.Public})
		// The list was found unchanged after asked, on this executor's clock: the TTL
		// restarts from then. The reply's ListedAt is on registrysync's clock, which may be
		// behind this one by more than the TTL (or behind the clock of the host whose
		// connector listed it before): confirmed at it, the list would still be out of date
		// here, and every call refused unavailable.
		if rep.Error == nil && rep.Fingerprint != "" {
			rep.ListedAt = asked
		}
		return relisted{rep, gen}
	})
	if rep.Error != nil {
		why := rep.Error.Message
		if rep.Error.Reason != "" {
			why += " (" + rep.Error.Reason + ")"
		}
		return staleness.Verdict{State: staleness.Unavailable, Reason: "ttl ran out and re-listing failed: " + why}, max(rep.Error.RetryAfterMs, 0), nil
	}
	fromSnapshot := rep.Sequence > 0
	if fromSnapshot {
		// A new snapshot was published: decide on it. Unless the view was dropped to replay
		// the stream since the re-list was asked (purged, or created again): its sequence
		// names nothing the replay is sure to apply, and the view caught up decides, with the
		// re-list's fingerprint (as for a list found unchanged).
		switch err := e.reg.waitAppliedOf(ctx, e.stopping, rep.Sequence, rep.gen); {
		case errors.Is(err, errReplayed):
			fromSnapshot = false
		case errors.Is(err, errStopping):
			return staleness.Verdict{}, 0, err
		case err != nil:
			return staleness.Verdict{State: staleness.Unavailable, Reason: "ttl ran out; the new list did not arrive in time"}, 0, nil
		}
	}
	// Read from a view that holds what the stream holds: one part way through a replay holds
	// the stream's first events without the later ones (its server's status, not yet its list:
	// refused not_found; a tool revoked later: fresh). See registry.caughtUp.
	v, replayed, err := e.reg.toolCaughtUp(ctx, e.stopping, t, rep.gen, func() {
		if rep.Fingerprint != "" {
			// Unchanged: the list is confirmed as of when it was asked for (ignored if it is
			// not the list held).
			e.reg.view.Confirm(t.Server, subjects.KindTools, rep.Fingerprint, rep.ListedAt)
		}
	})
	switch {
	case errors.Is(err, errStopping):
		return staleness.Verdict{}, 0, err
	case err != nil:
		return staleness.Verdict{State: staleness.Unavailable, Reason: "ttl ran out; the executor is replaying the registry stream (purged, or created again) and did not catch up in time"}, 0, nil
	}
	fromSnapshot = fromSnapshot && !replayed
	if v.State == staleness.Expired {
		// The list held now came from this re-list (a new snapshot, or a later one in the
		// stream), or it is the list this re-list confirmed (its fingerprint, confirmed at or
		// after it was asked for): it is as fresh as it gets for this call, though its TTL may
		// have run out again since — at once for a ttlMs of 0 ("always stale": mcp-go servers
		// send it by default), which a TTL counted from the confirmation never outlives. A list
		// of another fingerprint is not lifted, whatever its listedAt says: a snapshot stamped
		// by a host whose clock is ahead counts as listed when it arrived (staleness.notAhead),
		// after the re-list was asked, though the re-list found the server listing another.
		if fromSnapshot || rep.Fingerprint != "" && v.Fingerprint == rep.Fingerprint && !v.ListedAt.Before(rep.ListedAt) {
			v.State, v.Reason = staleness.Fresh, ""
			return v, 0, nil
		}
		return staleness.Verdict{State: staleness.Unavailable, Reason: "ttl ran out and the re-list did not confirm the list"}, 0, nil
	}
	return v, 0, nil
}

// refuse answers a call that ends before dispatch (or without one).
//
// A refusal is not the answer of a call id claimed before (see claim): an earlier request of
// the call was dispatched and its side effect may have happened — this is a resend once the
// calls stream's de-duplication window is past, while the first still runs or after it, or a
// redelivery refused now (revoked since, say) — so the answer is that request's (answerClaimed).
//
// A refusal of a call delivered again takes the call's claim first (refuseClaiming): a copy of
// it may still wait for approval elsewhere, to run once approved.
func (e *Executor) refuse(ctx context.Context, c *call, status string, err *subjects.Error) error {
	if status == subjects.CallRefused && c.tenant != "" && c.req.ID != "" {
		if c.redelivered {
			return e.refuseClaiming(ctx, c, status, err)
		}
		if claimed, cerr := e.claimed(ctx, c); cerr != nil {
			return fmt.Errorf("%w: %w", errRetry, cerr)
		} else if claimed {
			return e.answerClaimed(ctx, c)
		}
	}
	return e.storeRefusal(ctx, c, status, err)
}

// storeRefusal stores and sends err as c's answer, and records it in the audit stream.
func (e *Executor) storeRefusal(ctx context.Context, c *call, status string, err *subjects.Error) error {
	err.Message = e.audit.redact.StringCut(err.Message, "…") // (words quoted in it may be cut: see emitOn)
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: err.Code, Code: err.Code, Message: err.Message}))
	res := refusal(c.tenant, c.req, status, err)
	res.StartedAt = c.started
	return e.finish(ctx, c, res)
}

// refuseClaiming is refuse for a call delivered again, whose answer says it did not run (a
// refusal, or the last delivery's internal). Another copy of its request may still wait for
// approval (its executor's heartbeats lost past AckWait) and run once approved: it looked for
// an answer before its wait, not after, and ran the call under the refusal stored meanwhile —
// the side effect happened, and the call's one answer said it did not. The refusal takes the
// call's claim first, as a dispatch does: of it and that copy's dispatch, one (a copy approved
// later finds the claim and gives the answer stored). Claimed before: the holder's answer
// (answerClaimed). A bucket with no room: refused without the claim, as before. The answer not
// stored, the claim is given back (the next delivery takes it again, nothing ran).
func (e *Executor) refuseClaiming(ctx context.Context, c *call, status string, err *subjects.Error) error {
	now := e.hostNow().UTC()
	// A claimant, as claim's: another delivery of the call in this process finding the claim
	// before the refusal is stored waits for it, not taking its holder for gone (holderGone).
	key, rev, in, cerr := e.createClaim(ctx, c, &claimValue{Tool: c.req.Tool, By: e.cfg.Name, At: now,
		Until: now.Add(e.cfg.AckWait), Seq: c.seq, Refused: err.Code})
	switch {
	case errors.Is(cerr, jetstream.ErrKeyExists):
		return e.answerClaimed(ctx, c)
	case subjects.StoreRefused(cerr):
		e.cfg.Log.Warn().Err(cerr).Str("call", e.logText(c.req.ID)).Msg("refusal of a call delivered again not claimed: a copy of it waiting for approval elsewhere may still run")
	case cerr != nil:
		return fmt.Errorf("%w: claim: %w", errRetry, cerr)
	}
	ferr := e.storeRefusal(ctx, c, status, err)
	if ferr != nil && cerr == nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveClaimTimeout)
		defer cancel()
		// A store whose last try failed may have stored the answer all the same (its PubAck
		// lost): given back then, the claim would let a copy waiting for approval run the call
		// under that answer. Only a refusal surely not stored gives it back.
		if _, stored, lerr := e.lookupResult(dctx, c.tenant, c.req.ID); lerr != nil || stored {
			return ferr
		}
		if derr := e.st.claims.Delete(dctx, key, jetstream.LastRevision(rev)); derr != nil {
			e.cfg.Log.Debug().Err(derr).Str("claim", e.logRedacted(key)).Msg("claim of a refusal not given back")
		} else if in != nil {
			in.claiming.Store(false) // (given back: no longer this delivery's)
		}
	}
	return ferr
}

// refuseReplyOnly answers c's caller (its reply subject, if any) with a refusal that is not
// the answer of c's call id: it is not stored on the results stream, which keeps one answer per
// id, nor published on the results subject, whose readers wait for that one answer — that of
// another request of the id that may still run (see approvalConflict). The audit stream
// records it as any refusal.
func (e *Executor) refuseReplyOnly(c *call, status string, err *subjects.Error) error {
	err.Message = e.audit.redact.StringCut(err.Message, "…") // (words quoted in it may be cut: see emitOn)
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: err.Code, Code: err.Code, Message: err.Message}))
	res := refusal(c.tenant, c.req, status, err)
	res.StartedAt = c.started
	e.stats.answered.Add(1)
	e.stats.nanos.Add(int64(time.Since(c.started)))
	e.stats.refused.Add(1)
	e.reply(c.replyTo, res)
	e.audit.emit(subjects.AuditResult, c.audit(subjects.AuditEvent{Decision: res.Status, Code: err.Code, Message: err.Message}))
	return nil
}

// finish publishes the terminal answer and its audit event.
func (e *Executor) finish(ctx context.Context, c *call, res subjects.CallResult) error {
	if res.FinishedAt.IsZero() || res.FinishedAt.Before(res.StartedAt) {
		res.FinishedAt = time.Now().UTC()
	}
	toolError := isToolError(res.Result)
	// Counted once stored and before the caller can see the answer.
	count := func() {
		e.stats.answered.Add(1)
		e.stats.nanos.Add(int64(time.Since(c.started)))
		switch res.Status {
		case subjects.CallRefused:
			e.stats.refused.Add(1)
		case subjects.CallFailed:
			e.stats.failed.Add(1)
		}
		if toolError {
			e.stats.toolErrors.Add(1)
		}
	}
	given, err := e.answerGiven(ctx, c.seq, res, c.replyTo, count)
	if err != nil {
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	if given != nil {
		// The call id's answer stored before is the one given (a resend past the calls
		// stream's de-duplication window that ran again: a read-only or idempotent tool): the
		// result event records that answer, as the caller got it, and says how this run ended.
		own := res.Status
		if res.Error != nil {
			own += " " + res.Error.Code
		}
		ev := subjects.AuditEvent{Decision: given.Status, IsError: isToolError(given.Result),
			Message: "answered with the call id's earlier answer (duplicate); this request's own run ended " + own}
		if given.Error != nil {
			ev.Code = given.Error.Code
			ev.Message = given.Error.Message + " (" + ev.Message + ")"
		}
		if len(given.Result) > 0 {
			ev.Result, ev.ResBytes, ev.Truncated = e.audit.resultPayload(given.Result)
		}
		e.audit.emit(subjects.AuditResult, c.audit(ev))
		return nil
	}
	ev := subjects.AuditEvent{Decision: res.Status, IsError: toolError}
	if res.Error != nil {
		ev.Code, ev.Message = res.Error.Code, res.Error.Message
	} else if c.unchecked != "" {
		ev.Message = e.audit.redact.String(c.unchecked + "; the result was passed on without checking it against the outputSchema")
	}
	result := res.Result
	if len(result) == 0 {
		result = c.withheld
	}
	if len(result) > 0 {
		ev.Result, ev.ResBytes, ev.Truncated = e.audit.resultPayload(result)
	}
	e.audit.emit(subjects.AuditResult, c.audit(ev))
	return nil
}

// lastDelivery answers a call delivered MaxDeliver times without an answer (its workers kept
// dying on it): never run it again.
//
// Claimed (refuseClaiming) by this request (dispatched; an earlier delivery that may still run,
// or whose executor stopped before recording the result: outcome_unknown), or by another
// request of the call id that may still run (this is a resend delivered again while it
// waited): its answer, waited for while its holder may still give it. Not claimed, its answer
// takes the claim: an earlier delivery may still wait for approval, and not run once approved.
func (e *Executor) lastDelivery(ctx context.Context, c *call, n uint64) error {
	return e.refuseClaiming(ctx, c, subjects.CallFailed, &subjects.Error{Code: subjects.CodeInternal,
		Message: fmt.Sprintf("the call was delivered %d times without an answer; it is not run again", n)})
}

// execute takes the limits, claims a side-effecting call, dispatches it and answers.
func (e *Executor) execute(ctx context.Context, c *call) error {
	t := c.tool
	defer e.giveBackRates(c) // (counts the lease holds are no longer c's)
	if !t.retrySafe() {
		// A resend after the calls stream's de-duplication window of a call answered without
		// being dispatched (refused, say) has no claim to find: it gets that answer, it does not
		// run now.
		if done, err := e.answered(ctx, c); done || err != nil {
			return err
		}
	} else if c.redelivered || c.approved {
		// A claim says an earlier delivery dispatched this call as a side-effecting one (its
		// executor died before recording the result): the tool re-listed read-only or
		// idempotent since does not make that dispatch harmless to repeat. The claim decides,
		// as it does for a tool that still has side effects. Or, of a call that waited for
		// approval, that another delivery of it answered meanwhile that it does not run
		// (refuseClaiming): run now, its caller got "not run" for a call that ran.
		if claimed, err := e.claimed(ctx, c); err != nil {
			return fmt.Errorf("%w: %w", errRetry, err)
		} else if claimed {
			return e.answerClaimed(ctx, c)
		}
	}
	var ls *lease
	var limited *subjects.Error
	var err error
	lim := e.cfg.Limits.limitsFor(c.tenant, t)
	if c.approved && !c.ratesTaken {
		// Approved, delivered again (an earlier delivery took the approval and handed the call
		// back, or died before dispatching it): its rates now, then its slots waited for as
		// its first delivery waited — refused at once, its approver's OK was thrown away.
		var counted []increment
		if counted, limited, err = e.lim.acquireRates(ctx, lim); err == nil && limited == nil {
			c.ratesTaken, c.counted = true, counted
		}
	}
	switch {
	case err != nil || limited != nil:
	case c.ratesTaken:
		ls, limited, err = e.slotsWhenFree(ctx, c, lim)
		if errors.Is(err, errStopping) {
			return err
		}
	default:
		ls, limited, err = e.lim.acquireFor(ctx, c.req.ID, requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout), lim)
	}
	e.endWait(c) // no longer waiting: it has its slots, or will not run
	if ls != nil {
		c.counted = nil // the lease's now (refunded when the call does not run)
	}
	if err != nil {
		return e.refuse(ctx, c, subjects.CallRefused, &subjects.Error{Code: subjects.CodeUnavailable, Message: "limits cannot be checked: " + err.Error()})
	}
	if limited != nil {
		return e.refuse(ctx, c, subjects.CallRefused, limited)
	}
	in, _ := ctx.Value(inflightKey{}).(*inflight)
	if in != nil {
		in.setLease(ls)
	}
	bg := context.WithoutCancel(ctx) // what is done once the call has run is not cut short
	defer func() {
		if in != nil {
			in.setLease(nil)
		}
		ls.release(bg)
	}()

	// (what an approved call waited for a concurrency slot is taken from its timeout: the
	// caller's wait for the answer allows the timeout once past the approval)
	timeout := requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout) - c.slotWaited
	if !t.retrySafe() {
		ok, err := e.claim(ctx, c, timeout)
		if err != nil {
			ls.refund() // it does not run now
			if subjects.StoreRefused(err) {
				// JetStream answered that it has no room for the claim: it does not run
				// without one, and delivering it again only asks again (and its approver
				// again), ending internal. The caller learns what is full; nothing ran.
				return e.refuse(ctx, c, subjects.CallRefused, &subjects.Error{Code: subjects.CodeUnavailable,
					Message: "the claim of this side-effecting call could not be stored in " + subjects.InflightBucket + " (" + err.Error() + "); it was not run"})
			}
			return fmt.Errorf("%w: claim: %w", errRetry, err)
		}
		if !ok {
			ls.refund() // it does not run again
			ls.release(bg)
			// Claimed before: answered already (a resend after the de-duplication window gets
			// that answer again), claimed by another request of this call id that still runs
			// (its answer is this one's), or by a worker that died without answering: it may
			// have run.
			return e.answerClaimed(ctx, c)
		}
	}

	if !t.retrySafe() {
		// The point after which the outcome of a side effect may be unknown.
		e.audit.emit(subjects.AuditDispatch, c.audit(subjects.AuditEvent{Decision: "dispatch",
			Message: fmt.Sprintf("tools/call %s on %s (timeout %s)", t.Name, t.Server, timeout)}))
	}
	// Its slots are held until its deadline (plus the lease), renewed or not: past that the
	// connector no longer runs it, whatever becomes of this worker.
	ls.holdUntil(ctx, time.Now().Add(timeout))
	rep := e.dispatch(ctx, c, timeout)
	if rep.Error != nil && !c.reached {
		// No request reached a server: found stale (revoked, removed) at dispatch, or its
		// connector could not send it (not connected, none serving it). It never ran: its
		// counts are given back, as those of a call refused before dispatch are.
		ls.refund()
	}
	// The concurrency slots are for dispatches: free them now, not once the answer is out (a
	// caller's next call could find its own finished call still holding the slot).
	ls.release(bg)
	if in != nil {
		in.setLease(nil)
	}

	res := subjects.CallResult{V: subjects.Version, ID: c.req.ID, Tenant: c.tenant, Tool: c.req.Tool,
		Attempts: c.attempt, StartedAt: c.started}
	switch {
	case rep.Error != nil:
		res.Status = subjects.CallFailed
		if notSent(rep.Error.Code) {
			res.Status = subjects.CallRefused // nothing ran
		}
		msg := *rep.Error
		// (redacted before it is cut: a secret cut in two would not be found; StringCut: the
		// connector may have cut the server's words in it already, "…" where it did)
		msg.Message = truncateString(e.audit.redact.StringCut(msg.Message, "…"), maxDispatchErrorBytes)
		msg.Reason = truncateString(msg.Reason, maxDispatchErrorBytes)
		res.Error = &msg
		if msg.Code == subjects.CodeProtocolError && isJSONObject(rep.Withheld) {
			// The server's result, refused by the connector for its shape: not the answer's,
			// kept in the audit result event (as a result that fails its outputSchema).
			c.withheld = rep.Withheld
		}
	case len(rep.Result) > e.cfg.MaxResultBytes:
		res.Status = subjects.CallFailed
		res.Error = &subjects.Error{Code: subjects.CodeResultTooLarge,
			Message: fmt.Sprintf("the result of %s is %d bytes; the limit is %d (the call ran)", t.Public, len(rep.Result), e.cfg.MaxResultBytes)}
	case !e.resultFits(res, c.seq, len(rep.Result)):
		// Its answer could never be stored (nor sent): storing it failed until the call was
		// delivered again, ran again if read-only, and ended internal or outcome_unknown.
		res.Status = subjects.CallFailed
		bound := ""
		if b := e.resultsMaxBytes(); b > 0 {
			bound = fmt.Sprintf(", the results stream %s's max_bytes %d", subjects.ResultsStream, b)
		}
		res.Error = &subjects.Error{Code: subjects.CodeResultTooLarge,
			Message: fmt.Sprintf("the result of %s is %d bytes; its answer, one NATS message, holds at most %d (the NATS server's max_payload is %d%s) (the call ran)",
				t.Public, len(rep.Result), max(e.resultRoom(res, c.seq), 0), e.nc.MaxPayload(), bound)}
	case !isJSONObject(rep.Result):
		res.Status = subjects.CallFailed
		res.Error = &subjects.Error{Code: subjects.CodeProtocolError, Message: "the server's tools/call result is not a JSON object; the call ran"}
	default:
		// The tool ran: a result that fails its outputSchema is a malformed answer of the
		// server, never a refusal (see checkOutput).
		out := e.checkOutput(ctx, t, rep.Result)
		if out.fail != nil {
			res.Status = subjects.CallFailed
			res.Error = out.fail
			// (StringCut: the message quotes a location in the result cut to size, see issuesMessage)
			res.Error.Message = truncateString(e.audit.redact.StringCut(res.Error.Message, "…"), maxDispatchErrorBytes)
			if len(res.Error.Path) > maxOutputPath || e.audit.redact.String(res.Error.Path) != res.Error.Path {
				res.Error.Path = ""
			}
			c.withheld = rep.Result
			break
		}
		if out.unusable && t.outputWarned.CompareAndSwap(false, true) {
			e.cfg.Log.Warn().Str("tool", t.Public).Str("why", out.unchecked).Msg("results of this tool are passed on without checking them against its outputSchema")
		}
		c.unchecked = out.unchecked
		res.Status = subjects.CallOK
		res.Result = rep.Result
	}
	if res.Error != nil {
		e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: res.Error.Code, Code: res.Error.Code, Message: res.Error.Message}))
	}
	return e.finish(bg, c, res)
}

// slotsWhenFree takes the concurrency slots of an approved call, whose rates it took before it
// was asked about: a busy cap is waited for (every concurrencyRetryAfter, up to the call's
// timeout) rather than refused at once, as its approver was told OK. Past the timeout the
// refusal is the cap's (rate_limited), as when the slot comes with none of the timeout left; the
// executor stopping hands the call back (errStopping), its approval record marked so that the
// next delivery goes on as approved at once (handBackApproved). The dispatch then has what is
// left of the timeout (c.slotWaited).
func (e *Executor) slotsWhenFree(ctx context.Context, c *call, lim []scopeLimit) (*lease, *subjects.Error, error) {
	start := time.Now()
	if !c.approvedAt.IsZero() {
		start = c.approvedAt // (what it waited for the registry replay is of its timeout too)
	}
	timeout := requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout)
	until := start.Add(timeout)
	for {
		ls, limited, err := e.lim.acquireSlots(ctx, c.req.ID, until.Sub(time.Now()), lim, c.counted)
		if ls != nil {
			c.slotWaited = time.Since(start)
			if c.slotWaited >= timeout {
				// The slot came with none of the timeout left (the poll or the slot reads ran
				// late): not claimed and dispatched with no time (a timeout, a side effect's
				// outcome unknown), refused as if no slot had come.
				ls.release(context.WithoutCancel(ctx))
				return nil, &subjects.Error{Code: subjects.CodeRateLimited, RetryAfterMs: concurrencyRetryAfter.Milliseconds(),
					Message: fmt.Sprintf("no concurrency slot for %s within its timeout (%s)", c.tool.Public, timeout)}, nil
			}
			return ls, nil, nil
		}
		if err != nil || !time.Now().Add(concurrencyRetryAfter).Before(until) {
			return nil, limited, err
		}
		if f := e.cfg.hooks.slotBusy; f != nil {
			f(c.req.ID)
		}
		select {
		case <-e.stopping:
		case <-ctx.Done():
		case <-time.After(concurrencyRetryAfter):
			continue
		}
		e.handBackApproved(c) // (its next delivery goes on as approved at once)
		return nil, nil, errStopping
	}
}

// maxRetryWait is the backoff's bound before a dispatch is retried (randomised by ±50%, as every
// backoff wait), and the longest retryAfterMs of a server's refusal a worker waits for. A server that asks for longer
// (a 429's Retry-After) gets its answer to the caller, retryAfterMs included, at once:
// the caller can wait without holding a worker and the call's concurrency slot, and a server that
// answers every call so would otherwise park every worker of the executor, whatever the server.
const maxRetryWait = time.Second

// dispatch sends tools/call, retrying what is safe to retry: a failure before sending
// (unavailable) for any tool; transport failures and unknown outcomes only for read-only or
// idempotent tools. Never a protocol error, never past the call's deadline, never before the
// server's retryAfterMs (not at all when that is past maxRetryWait or the deadline: the answer
// carries it). Each attempt first
// checks the freshness view: a tool revoked, removed or stale since admission is not sent, nor
// one listed since with another definition or in a list its caller may not use.
func (e *Executor) dispatch(ctx context.Context, c *call, timeout time.Duration) subjects.DispatchReply {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var bo *backoff.ExponentialBackOff // built at the first retry
	deadline, _ := ctx.Deadline()
	var last *subjects.DispatchReply // the previous attempt's answer
	for {
		// A tool revoked, removed or made stale since it was admitted (or since the previous
		// attempt) is not dispatched (again): a revoked tool never executes, retry or not. Nor
		// is one the view no longer knows (a removal it stopped remembering: unknown).
		// (The entry the table holds now is read with the verdict: one the removal of the
		// tool left, without its definition, comes with a verdict that says so. And from a
		// view that holds what the registry stream holds: one replaying it, purged or created
		// again since admission, holds its first events without the later ones, a revocation
		// say: see registry.caughtUp.)
		// Nor does it wait on once the executor stops: the replay may outlast StopGrace, and a
		// side-effecting call's claim left by a process gone answers outcome_unknown for a call
		// never sent. (Not handed back: its claim is taken, and would answer so too.)
		v, cur, err := e.reg.heldCaughtUp(ctx, e.stopping, c.tool)
		if err != nil {
			if last != nil && !notSent(last.Error.Code) {
				return *last // what the earlier attempt did stands; it is not retried
			}
			msg := "the executor is replaying the registry stream (purged, or created again) and did not catch up within the call's timeout; nothing was sent"
			if errors.Is(err, errStopping) {
				msg = "the executor stopped while replaying the registry stream (purged, or created again); nothing was sent"
			}
			return subjects.DispatchReply{V: subjects.Version, NotSent: true, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: msg}}
		}
		if v.State == staleness.Revoked || v.State == staleness.Removed ||
			v.State == staleness.Stale || v.State == staleness.Unknown {
			if last != nil && !notSent(last.Error.Code) {
				return *last // what the earlier attempt did stands; it is not retried
			}
			return subjects.DispatchReply{V: subjects.Version, NotSent: true, Error: &subjects.Error{Code: subjects.CodeStale,
				Message: c.tool.Public + " is " + string(v.State) + ": " + v.Reason + "; nothing was sent", Reason: v.Reason}}
		}
		if last != nil && c.tool.retrySafe() {
			// Retried as read-only or idempotent: not once the tool is re-listed as neither
			// (the definition it would run under may have side effects, and the earlier attempt
			// may have run it; nor was it claimed or approved as one). What the earlier attempt
			// did stands.
			if cur != c.tool && (cur == nil || !cur.retrySafe() ||
				cur.Server != c.tool.Server || cur.Name != c.tool.Name) {
				return *last
			}
		}
		// Sent (again) only under the definition admitted, in a list its caller may use: the
		// call was not authorized, approved or validated against what its server lists now (a
		// tool now destructive, another inputSchema, a list private to another context). A
		// retry may come after a re-list (the new connector's first list, after a crash: see
		// ReconnectGrace); so may the first attempt: an approved call waits for a concurrency
		// slot up to its timeout (slotsWhenFree), and admission read the verdict and the
		// definition apart.
		if cur == nil || !cur.sameDefinition(c.tool) ||
			!e.cfg.Policy.MayUseScope(c.pr, v.CacheScope, v.AuthContext) {
			if last != nil && !notSent(last.Error.Code) {
				return *last // what the earlier attempt did stands; it is not retried
			}
			return subjects.DispatchReply{V: subjects.Version, NotSent: true, Error: &subjects.Error{Code: subjects.CodeStale,
				Message: c.tool.Public + " was listed again, otherwise, since the call was admitted; nothing was sent", Reason: "re-listed"}}
		}
		c.attempt++
		if in, _ := ctx.Value(inflightKey{}).(*inflight); in != nil {
			in.dispatched.Store(true)
		}
		e.stats.dispatched.Add(1)
		rep := e.disp.Dispatch(ctx, c.tool.Server, subjects.DispatchRequest{
			V: subjects.Version, CallID: c.req.ID, Tool: c.tool.Name, Arguments: c.req.Arguments,
			TimeoutMs: max(1, time.Until(deadline).Milliseconds()),
		})
		c.reached = c.reached || !neverSent(rep)
		if rep.Error == nil {
			return rep
		}
		if ctx.Err() != nil && !notSent(rep.Error.Code) {
			// Past the deadline an unknown outcome is a timeout; an answer that says what
			// happened (the server's protocol_error, a result_too_large: the call ran) keeps
			// its code — the connector's answer may come after the deadline (NATSDispatcher's
			// grace).
			if code := rep.Error.Code; code != subjects.CodeProtocolError && code != subjects.CodeResultTooLarge {
				already := code == subjects.CodeTimeout // the connector's own timeout says so
				rep.Error.Code = subjects.CodeTimeout
				if !already && !strings.Contains(rep.Error.Message, "timeout") {
					rep.Error.Message = fmt.Sprintf("no answer within %s: %s", timeout, rep.Error.Message)
				}
			}
			return rep
		}
		safe := rep.Error.Code == subjects.CodeUnavailable ||
			c.tool.retrySafe() && (rep.Error.Code == subjects.CodeTransportError || rep.Error.Code == subjects.CodeOutcomeUnknown)
		// A connector that refused the call before sending it (not connected yet, or none
		// serving the server) in the executor's first ReconnectGrace is a restart under way:
		// after a crash the server's last status is the dead connector's ready, so admission
		// let the call through while the new connector still connects. It is waited for as
		// awaitReconnect waits for a connecting server (the grace and the call's deadline
		// bound it), not given up after RetryMax quick attempts, which threw away the calls
		// queued across the restart.
		restarting := false
		if rep.Error.Code == subjects.CodeUnavailable && neverSent(rep) && rep.Error.RetryAfterMs == 0 {
			switch e.awaitReconnect(ctx, c, c.tool.Server) {
			case reconnected:
				restarting = true
			case reconnectStopping:
				return rep
			}
		}
		if !safe || c.attempt >= e.cfg.RetryMax && !restarting {
			return rep
		}
		last = &rep
		// The server said when to come back (a 429's Retry-After): sooner it would refuse
		// again, and a server shedding load is the last one to send more to. Only what it asked
		// is held against maxRetryWait: the backoff's own wait, randomised around its 1 s bound,
		// may come out longer.
		ra := time.Duration(rep.Error.RetryAfterMs) * time.Millisecond
		if bo == nil {
			// Options, not fields set afterwards: the constructor starts the first interval at
			// the default 500 ms, and a field set after it only applied from the second retry on.
			bo = backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
				backoff.WithMaxInterval(maxRetryWait), backoff.WithMaxElapsedTime(0))
		}
		wait := max(bo.NextBackOff(), ra)
		if ra > maxRetryWait || time.Until(deadline) <= wait {
			return rep // with the server's retryAfterMs, for the caller
		}
		var stopping <-chan struct{} // (a wait for a connector only until the executor stops)
		if restarting {
			stopping = e.stopping
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return rep
		case <-stopping:
			return rep
		}
	}
}

// validateArguments validates c's arguments against t's inputSchema within the process's
// decode budget: large arguments wait for room to be decoded (see decodebudget.go), at most the
// call's timeout.
func (e *Executor) validateArguments(ctx context.Context, c *call, t *tool) *subjects.Error {
	if len(c.req.Arguments) < decodeUnit {
		return validateArguments(t, c.req.Arguments) // not counted: no wait (nor its timer)
	}
	wait := requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	release, err := e.decode.acquire(wctx, len(c.req.Arguments))
	if err != nil {
		return &subjects.Error{Code: subjects.CodeUnavailable, RetryAfterMs: 1000,
			Message: fmt.Sprintf("the executor is validating %d MiB of large arguments and results at once, its limit, and this call waited %v for its turn; nothing was run", decodeBudget>>20, wait)}
	}
	hold := newDecodeHold(release)
	defer hold.end()
	lim := defaultValidationLimits
	lim.hold = hold // an abandoned validation keeps its share until it stops
	return validateArgumentsWithin(t, c.req.Arguments, lim)
}

// checkOutput is checkOutput within the process's decode budget. The tool ran: the wait is not
// cut short by the call's deadline (other holders' validations are bounded in time).
func (e *Executor) checkOutput(ctx context.Context, t *tool, result []byte) outputCheck {
	if t.OutputSchema == nil {
		return outputCheck{}
	}
	release, err := e.decode.acquire(context.WithoutCancel(ctx), len(result))
	if err != nil { // (not expected: the context is not cancelled)
		return outputCheck{unchecked: "no memory to check it: " + err.Error()}
	}
	hold := newDecodeHold(release)
	defer hold.end()
	lim := defaultValidationLimits
	lim.hold = hold // an abandoned validation keeps its share until it stops
	return checkOutputWithin(t, result, lim)
}

// claimKey is the claims-bucket key of a call.
func claimKey(tenant, id string) string { return kvToken(tenant) + "." + kvToken(id) }

// claim records durably that a side-effecting call is about to be dispatched with timeout, and
// until when its answer may come. It reports false when the call was claimed before.
func (e *Executor) claim(ctx context.Context, c *call, timeout time.Duration) (bool, error) {
	now := e.hostNow().UTC()
	cv := claimValue{Tool: c.tool.Public, Server: c.tool.Server, By: e.cfg.Name, At: now,
		Until: now.Add(timeout + e.cfg.AckWait), Seq: c.seq}
	key, rev, in, err := e.createClaim(ctx, c, &cv)
	if in != nil && err == nil {
		in.mu.Lock()
		in.held = &heldClaim{key: key, rev: rev, val: cv}
		in.mu.Unlock()
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	return err == nil, err
}

// createClaim creates c's claim with value cv (its Instance set here: this process's), the
// delivery in flight in ctx (nil if none) marked a claimant from before the claim exists (see
// holderGone) until it is known not to be this delivery's. It returns the claim's key and
// revision, and that delivery.
func (e *Executor) createClaim(ctx context.Context, c *call, cv *claimValue) (string, uint64, *inflight, error) {
	if id := e.instance.Load(); id != nil {
		cv.Instance = *id
	}
	val, _ := json.Marshal(cv)
	in, _ := ctx.Value(inflightKey{}).(*inflight)
	if in != nil {
		in.claiming.Store(true)
	}
	key := claimKey(c.tenant, c.req.ID)
	rev, err := e.st.claims.Create(ctx, key, val)
	if err != nil && in != nil {
		in.claiming.Store(false) // not this delivery's claim
	}
	return key, rev, in, err
}

// answerClaimed answers a call whose id was claimed before: with the claim holder's answer
// (waited for while it may still come, see claimedAnswer), else outcome_unknown — the claim
// holder was dispatched, and the call is not run again — or, of a claim taken for a refusal
// (refuseClaiming) whose holder never stored it, internal: nothing ran, nor runs.
func (e *Executor) answerClaimed(ctx context.Context, c *call) error {
	prev, found, cl, err := e.claimedAnswer(ctx, c)
	if errors.Is(err, errStopping) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: look up result: %w", errRetry, err)
	}
	if found {
		prev.Duplicate = true
		if err := e.answerFor(ctx, c.seq, prev, c.replyTo, nil); err != nil {
			return fmt.Errorf("%w: %w", errRetry, err)
		}
		return nil
	}
	if cl.Refused != "" {
		// The holder took the claim to store a refusal (refuseClaiming) and never did: nothing
		// was dispatched under it, nor can be while it stands. (Refused again instead, the call
		// would find the claim again: internal, which takes no claim.)
		return e.refuse(ctx, c, subjects.CallFailed, &subjects.Error{Code: subjects.CodeInternal,
			Message: "another delivery of this call answered it " + cl.Refused + " without running it, and that answer was never stored; " + c.req.Tool + " was not run"})
	}
	return e.refuse(ctx, c, subjects.CallFailed, &subjects.Error{Code: subjects.CodeOutcomeUnknown,
		Message: "an earlier attempt of this call was dispatched and its result was never recorded; " + c.req.Tool + " is not idempotent, so it is not run again"})
}

// claimValue is the value of a claim.
type claimValue struct {
	Tool   string    `json:"tool"`
	Server string    `json:"server"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	// Until is when the claim holder's answer is due at the latest: its call's timeout and
	// AckWait (for storing the answer) past At.
	Until time.Time `json:"until"`
	// Seq is the calls stream sequence of the request that claimed: a delivery of that request
	// again finds its own claim (its worker died, or its progress heartbeats were lost while it
	// still runs); any other is a resend of the call id.
	Seq uint64 `json:"seq,omitempty"`
	// Instance is the id of the holder's discovery service ($SRV.PING.mcpstream-executor.<id>),
	// "" when it had none: what tells a holder that is gone (see holderGone).
	Instance string `json:"instance,omitempty"`
	// Left says the holder's delivery ended without storing an answer (see leaveClaim): it
	// gives none.
	Left bool `json:"left,omitempty"`
	// Refused is the code of the answer the holder took the claim to store without
	// dispatching (see refuseClaiming), "" for a dispatch: nothing runs under such a claim, and
	// its holder gone without that answer is no outcome_unknown.
	Refused string `json:"refused,omitempty"`
}

// heldClaim is the claim a delivery made: its key, revision and value.
type heldClaim struct {
	key string
	rev uint64
	val claimValue
}

// leaveClaimTimeout bounds the update of leaveClaim.
const leaveClaimTimeout = 2 * time.Second

// leaveClaim marks the claim in's delivery made, if any, Left: the delivery ends without its
// answer stored (storing it failed, a panic, handed back while stopping), so a delivery of the
// call waiting for it (see claimedAnswer) stops waiting — its process may live on and answer
// pings. Best effort: not marked, the waiter waits until the claim's Until.
func (e *Executor) leaveClaim(in *inflight) {
	in.mu.Lock()
	h := in.held
	in.mu.Unlock()
	if h == nil {
		return
	}
	h.val.Left = true
	val, _ := json.Marshal(h.val)
	ctx, cancel := context.WithTimeout(context.Background(), leaveClaimTimeout)
	defer cancel()
	if _, err := e.st.claims.Update(ctx, h.key, val, h.rev); err != nil {
		e.cfg.Log.Debug().Err(err).Str("claim", e.logRedacted(h.key)).Msg("claim not marked left")
	}
}

// claimWaitPoll is how often a request waiting for the answer of its call's claim holder looks
// for it.
const claimWaitPoll = 250 * time.Millisecond

// holderCheckEvery is how often a request waiting for the answer of its call's claim holder
// asks whether the holder is gone; holderPingTimeout bounds each question.
const (
	holderCheckEvery  = time.Second
	holderPingTimeout = time.Second
)

// claimedAnswer returns the answer of c's call id, claimed before, waiting for it while the
// claim's holder may still give it: until the claim's Until, unless the holder is gone
// (holderGone). That holder is another request of the same call id (a resend once the calls
// stream's de-duplication window is past, while the first still runs), or an earlier delivery
// of c's own request (same calls stream sequence): its worker died, or its progress heartbeats
// were lost past AckWait (a network stall, a paused process) while it still runs — the first
// answer stored is the call's only one, so outcome_unknown stored now would replace its result.
// Also when c itself is a resend delivered again (its executor stopped while it waited).
// It returns the claim as read too (zero when none was read): how its holder's answer, never
// given, is to be told (see answerClaimed).
func (e *Executor) claimedAnswer(ctx context.Context, c *call) (subjects.CallResult, bool, claimValue, error) {
	var cl claimValue // (a claim of an earlier version has no Until: nothing is waited for)
	prev, found, err := e.lookupResult(ctx, c.tenant, c.req.ID)
	if err != nil || found {
		return prev, found, cl, err
	}
	entry, err := e.st.claims.Get(ctx, claimKey(c.tenant, c.req.ID))
	if err != nil {
		return prev, false, cl, err
	} else if json.Unmarshal(entry.Value(), &cl) != nil {
		return prev, false, claimValue{}, nil
	}
	if cl.Seq == 0 && c.redelivered {
		return prev, false, cl, nil // its own claim, of an earlier version: not waited for
	}
	until := e.claimUntil(ctx, cl, entry.Created())
	var check time.Time // when to ask next whether the holder is gone
	for time.Now().Before(until) {
		if !time.Now().Before(check) {
			if e.holderGone(ctx, c, cl) {
				break
			}
			check = time.Now().Add(holderCheckEvery)
		}
		select {
		case <-e.stopping:
			return prev, false, cl, errStopping
		case <-time.After(min(claimWaitPoll, time.Until(until))):
		}
		if prev, found, err = e.lookupResult(ctx, c.tenant, c.req.ID); err != nil || found {
			return prev, found, cl, err
		}
	}
	// A last look: the holder may have stored its answer just before it went.
	prev, found, err = e.lookupResult(ctx, c.tenant, c.req.ID)
	return prev, found, cl, err
}

// claimUntil is when, on this host's clock, the answer of claim cl's holder is due at the
// latest. cl's At and Until are on the holder's host clock, which may be minutes off this one's
// (NTP drift, a VM resumed): compared with this clock, a holder behind made a redelivery stop
// waiting at once and store outcome_unknown over the call that still ran, and one ahead made
// it wait the skew longer. Their difference (the holder's budget: its call's timeout and
// AckWait) is one clock's; it runs from stored, the claim's timestamp on the NATS server's
// clock (see storedDeadline).
func (e *Executor) claimUntil(ctx context.Context, cl claimValue, stored time.Time) time.Time {
	if cl.At.IsZero() || cl.Until.IsZero() {
		return cl.Until // (a claim of an earlier version)
	}
	return e.storedDeadline(ctx, cl.At, stored, cl.Until.Sub(cl.At))
}

// storedDeadline is when, on this host's clock, a wait of budget ends that another executor
// began at start, on its own host's clock, and stored in a record whose timestamp on the NATS
// server's clock is stored (zero: not known). Host clocks may be minutes apart (NTP drift, a VM
// resumed): compared with this one, a start from a host behind ended the wait at once (a
// redelivery stored outcome_unknown over a call still running, an approval wait handed over
// answered approval_timeout asking nobody, an approval gate looked expired, a decided approval
// went on before the earlier delivery's answer could come), and one from a host ahead made it
// longer. The budget runs from stored instead, read with the offset of the server's clock the
// limiter measured (see windowNow); when no offset is known, from start, but never more than
// budget from now.
func (e *Executor) storedDeadline(ctx context.Context, start, stored time.Time, budget time.Duration) time.Time {
	now := time.Now()
	if !stored.IsZero() && e.lim != nil {
		if since, ok := e.lim.serverSince(ctx, stored); ok {
			return now.Add(budget - since)
		}
	}
	return minTime(start.Add(budget), now.Add(budget))
}

// holderGone reports whether the holder of claim cl can no longer answer: its delivery ended
// without an answer (the claim is marked Left), it was this process and no worker here handles
// its delivery any more, or its process's discovery service has no responders (the process
// exited, or its connection closed: a crashed executor's claim is answered outcome_unknown at
// once, not at its Until). A holder that cannot be asked (a claim without Instance or Seq, a
// ping that times out: a paused process, a stalled connection, a NATS user without permission
// to publish the ping) may still answer.
func (e *Executor) holderGone(ctx context.Context, c *call, cl claimValue) bool {
	if entry, err := e.st.claims.Get(ctx, claimKey(c.tenant, c.req.ID)); err == nil {
		var now claimValue
		if json.Unmarshal(entry.Value(), &now) == nil && now.Left {
			return true
		}
	}
	if cl.Instance == "" || cl.Seq == 0 {
		return false
	}
	if own := e.instance.Load(); own != nil && *own == cl.Instance {
		in, _ := ctx.Value(inflightKey{}).(*inflight)
		return !e.flight.holding(cl.Seq, in)
	}
	subj, err := micro.ControlSubject(micro.PingVerb, subjects.ExecutorService, cl.Instance)
	if err != nil {
		return false
	}
	_, err = e.nc.Request(subj, nil, holderPingTimeout)
	return errors.Is(err, nats.ErrNoResponders)
}

// fromClaim answers c from its call's claim when there is one (answerClaimed: the holder's
// answer, waited for while it may come, or outcome_unknown), and returns how c ends; nil when
// the call is not claimed.
func (e *Executor) fromClaim(ctx context.Context, c *call) *stop {
	claimed, err := e.claimed(ctx, c)
	switch {
	case err != nil:
		return &stop{err: fmt.Errorf("%w: %w", errRetry, err)}
	case !claimed:
		return nil
	}
	if err := e.answerClaimed(ctx, c); err != nil {
		return &stop{err: err}
	}
	return &stop{done: true}
}

func (e *Executor) claimed(ctx context.Context, c *call) (bool, error) {
	_, err := e.st.claims.Get(ctx, claimKey(c.tenant, c.req.ID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// lookupResult returns the recorded answer of a call, if any.
func (e *Executor) lookupResult(ctx context.Context, tenant, id string) (subjects.CallResult, bool, error) {
	return getResult(ctx, e.st.results, tenant, id)
}

func getResult(ctx context.Context, results jetstream.Stream, tenant, id string) (subjects.CallResult, bool, error) {
	res, _, ok, err := storedResult(ctx, results, tenant, id)
	return res, ok, err
}

// storedResult is getResult with the stored answer's message.
func storedResult(ctx context.Context, results jetstream.Stream, tenant, id string) (subjects.CallResult, *jetstream.RawStreamMsg, bool, error) {
	m, err := results.GetLastMsgForSubject(ctx, subjects.Result(tenant, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return subjects.CallResult{}, nil, false, nil
	}
	if err != nil {
		return subjects.CallResult{}, nil, false, err
	}
	var res subjects.CallResult
	if err := json.Unmarshal(m.Data, &res); err != nil || res.ID != id {
		// Junk on a results subject is not an answer.
		return subjects.CallResult{}, nil, false, nil
	}
	return res, m, true, nil
}

// replyTo returns the call message's subjects.HeaderReplyTo when it is a subject under one of
// the configured reply prefixes, else "".
func (e *Executor) replyTo(m jetstream.Msg) string {
	h := m.Headers()
	if h == nil {
		return ""
	}
	return e.validReply(h.Get(subjects.HeaderReplyTo))
}

// maxReplySubject bounds a reply subject taken from a header.
const maxReplySubject = 512

// validReply returns s if it is a literal subject (no wildcard, no white space) under one of
// the reply prefixes, else "". A subject no service of mcpstream may answer on
// (subjects.Answerable: mcpstream's own subjects, the server's "$" ones) is refused even under a
// configured prefix: a prefix an operator set too broadly ("mcp", "$") must not let a caller have
// the worker publish on another tenant's calls or results subject for it.
func (e *Executor) validReply(s string) string {
	if s == "" || len(s) > maxReplySubject || strings.ContainsAny(s, " \t\r\n*>") ||
		strings.Contains(s, "..") || strings.HasSuffix(s, ".") || !subjects.Answerable(s) {
		return ""
	}
	for _, p := range e.cfg.ReplyPrefixes {
		if p != "" && strings.HasPrefix(s, p) && len(s) > len(p) {
			return s
		}
	}
	return ""
}

// answer stores the one terminal answer, calls stored (if not nil), then publishes the same
// bytes to the caller's reply subject (if any): a caller never sees an answer that is not
// stored, nor one its executor's counters do not hold yet.
func (e *Executor) answer(ctx context.Context, res subjects.CallResult, replyTo string, stored func()) error {
	return e.answerFor(ctx, 0, res, replyTo, stored)
}

// answerFor is answer by the request at calls stream sequence seq (0: unknown).
func (e *Executor) answerFor(ctx context.Context, seq uint64, res subjects.CallResult, replyTo string, stored func()) error {
	_, err := e.answerGiven(ctx, seq, res, replyTo, stored)
	return err
}

// answerGiven is answerFor, and returns the answer of the call id stored before, when that one
// (not res) is the answer given (nil otherwise).
func (e *Executor) answerGiven(ctx context.Context, seq uint64, res subjects.CallResult, replyTo string, stored func()) (*subjects.CallResult, error) {
	data, err := encodeResult(res)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	earlier, err := e.storeResult(ctx, seq, res, data)
	if err != nil {
		return nil, err
	}
	var given *subjects.CallResult
	switch {
	case earlier != nil && !res.Duplicate && !bytes.Equal(earlier, data): // (a Duplicate is the stored answer already)
		// An answer of this call id was stored before (the results stream refused this one):
		// that one is the call's answer, and the one the caller gets.
		var prev subjects.CallResult
		if err := json.Unmarshal(earlier, &prev); err != nil {
			return nil, fmt.Errorf("decode the stored answer: %w", err)
		}
		prev.Duplicate = true
		if data, err = encodeResult(prev); err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		given = &prev
	case stored != nil:
		stored() // stored now, or by an attempt of this very answer whose PubAck was lost
	}
	if replyTo != "" {
		if err := e.nc.Publish(replyTo, data); err != nil {
			e.cfg.Log.Debug().Err(err).Str("call", e.logText(res.ID)).Msg("reply")
		}
		yieldToReply()
	}
	return given, nil
}

// yieldToReply lets the goroutines that carry an answer just published to its caller run
// before the worker's bookkeeping after it (the audit result event, the ack). The answer
// crosses the connection's flusher, the NATS server's read loop and the caller's: on a machine
// with few cores, a worker that went straight on with its own work kept them waiting for a
// processor. Measured at one caller (executor BenchmarkCall, two cores): p50 −20%
// (calls-p50-ratio 2.85–2.88 → 2.28–2.29), none lost at 8 and 64 callers.
func yieldToReply() { runtime.Gosched() }

// reply publishes an answer already stored to the caller's reply subject, if any.
func (e *Executor) reply(replyTo string, res subjects.CallResult) {
	if replyTo == "" {
		return
	}
	data, err := encodeResult(res)
	if err == nil {
		err = e.nc.Publish(replyTo, data)
		yieldToReply()
	}
	if err != nil {
		e.cfg.Log.Debug().Err(err).Str("call", e.logText(res.ID)).Msg("reply")
	}
}

// storeResult stores the one terminal answer, retrying a failing JetStream for a few seconds.
// It is stored only while the call's results subject holds no answer (expected last subject
// sequence: 0, or that of junk found there), whatever the de-duplication window (ResultMsgID)
// says: a resend of the call id once the windows of the calls and results streams are past
// never replaces the answer. It returns the bytes of the answer stored before when the results
// stream refused this one (they may be this very answer's, stored by an attempt whose PubAck
// was lost), nil when this one was stored.
func (e *Executor) storeResult(ctx context.Context, seq uint64, res subjects.CallResult, data []byte) ([]byte, error) {
	msg := resultMsg(seq, res, data)
	var earlier []byte
	store := func() error {
		ack, err := e.js.PublishMsg(ctx, msg)
		switch {
		case errors.Is(err, nats.ErrConnectionClosed):
			return backoff.Permanent(err)
		case err == nil && !ack.Duplicate:
			return nil
		case err != nil && !subjects.WrongLastSequence(err):
			return err
		}
		// Refused, or dropped as a duplicate: what does the subject hold?
		m, gerr := e.st.results.GetLastMsgForSubject(ctx, msg.Subject)
		switch {
		case errors.Is(gerr, jetstream.ErrMsgNotFound):
			if err == nil {
				return nil // a duplicate whose answer is gone (purged): this one stands
			}
			msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
			return err
		case gerr != nil:
			return gerr
		case isAnswerOf(m.Data, res.ID):
			earlier = m.Data
			return nil
		case err == nil:
			return nil // a duplicate of an answer replaced by junk since: this one stands
		}
		// Junk on the results subject (published there by hand) is not an answer: store after it.
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(m.Sequence, 10))
		return err
	}
	// Up to 7 attempts with backoff between them; the backoff is built only when the first
	// attempt (almost every answer's only one) failed, and is handed that attempt's error.
	err := store()
	if first := err; first != nil {
		bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ExponentialBackOff{
			InitialInterval: 50 * time.Millisecond, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 2 * time.Second,
			Stop: backoff.Stop, Clock: backoff.SystemClock,
		}, 6), ctx)
		err = backoff.Retry(func() error {
			if replay := first; replay != nil {
				first = nil
				return replay
			}
			return store()
		}, bo)
	}
	if subjects.OutOfStorage(err) {
		err = e.storeWhenRoom(ctx, res, store, err)
	}
	return earlier, err
}

// storeFullRetry is how often a worker holding an answer JetStream had no room for tries to
// store it again; storeFullLog how often it says so.
const (
	storeFullRetry = 2 * time.Second
	storeFullLog   = 30 * time.Second
)

// storeWhenRoom stores an answer that JetStream had no room for (the server's or the account's
// storage is full: err), trying again until there is room or the executor stops. The worker
// keeps the answer meanwhile (heartbeats keep its call's message): handed back, the call would
// run again if read-only, be answered outcome_unknown if not, though its result was here, and
// once its deliveries ran out it would never be answered. While there is no room no answer can
// be stored, nor a new call taken: a waiting worker holds up nothing that could go on.
func (e *Executor) storeWhenRoom(ctx context.Context, res subjects.CallResult, store func() error, err error) error {
	began, logged := time.Now(), time.Time{}
	// Once out of room, every failure but a permanent one is waited out too: a timeout or no
	// responders while the server frees space (a hiccup, a leader moving) would otherwise hand
	// the call back, and a read-only tool would run again.
	var perm *backoff.PermanentError
	for err != nil && !errors.As(err, &perm) {
		if time.Since(logged) >= storeFullLog {
			logged = time.Now()
			msg := "JetStream has no room to store the answer of a call: kept until there is room (free storage on the NATS server, or lower streams.resultsMaxAge / auditMaxAge)"
			if !subjects.OutOfStorage(err) {
				msg = "JetStream, out of room before, still does not store the answer of a call (see the error): kept and tried again"
			}
			e.cfg.Log.Error().Err(err).Str("call", e.logText(res.ID)).Dur("waiting", time.Since(began).Round(time.Second)).Msg(msg)
		}
		select {
		case <-e.stopping:
			return fmt.Errorf("%w: %w", errStopping, err)
		case <-ctx.Done():
			return err
		case <-time.After(storeFullRetry):
		}
		err = store()
	}
	if errors.As(err, &perm) {
		err = perm.Err
	}
	return err
}

// resultMsg is the message that stores answer res (encoded as data) on the results stream.
func resultMsg(seq uint64, res subjects.CallResult, data []byte) *nats.Msg {
	msg := &nats.Msg{Subject: subjects.Result(res.Tenant, res.ID), Data: data, Header: nats.Header{}}
	msg.Header.Set(subjects.HeaderMsgID, subjects.ResultMsgID(res.Tenant, res.ID))
	if seq != 0 {
		msg.Header.Set(subjects.HeaderCallSeq, strconv.FormatUint(seq, 10))
	}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return msg
}

// answerSlack is room kept in resultRoom for what an answer may still gain: its finish time,
// duplicate: true, a longer expected sequence in its headers.
const answerSlack = 256

// resultRoom is how many bytes of a tool's result the answer res of the request at seq can
// carry: the answer is one NATS message, headers included, and the connection's max_payload
// (a server's default is 1 MiB) and the results stream's message size bound it whatever
// MaxResultBytes says.
func (e *Executor) resultRoom(res subjects.CallResult, seq uint64) int {
	return answerRoom(e.maxAnswerOf(res), res, seq)
}

// storedRecordBytes is what JetStream adds to a message's subject, headers and data when it
// counts the message against a stream's max_bytes (its record's own fields: at most 34 bytes
// in nats-server 2.15's file store), with room to spare.
const storedRecordBytes = 64

// maxAnswerOf is maxAnswer for answer res, within the results stream's max_bytes too (as last
// looked up, see resultsMaxBytes): JetStream acknowledges a message larger than a stream's bound
// with discard old, then drops it at once to stay within the bound (the oldest first, and it
// is the last), so such an answer was acknowledged and lost.
func (e *Executor) maxAnswerOf(res subjects.CallResult) int {
	mp := e.maxAnswer()
	if b := e.resultsMaxBytes(); b > 0 {
		mp = min(mp, int(min(b, math.MaxInt32))-len(subjects.Result(res.Tenant, res.ID))-storedRecordBytes)
	}
	return mp
}

// resultsInfoEvery is how long the results stream's max_bytes, once looked up, is used: the
// bound may be set or changed while the executor runs (`nats stream edit`, another role process
// declaring the stream with its own streams.resultsMaxBytes), and an answer sized by the bound
// found at start was acknowledged and dropped once it was over a bound set since.
const resultsInfoEvery = 5 * time.Second

// resultsInfoTimeout bounds a look-up of the results stream's max_bytes; the bound last known
// is used when it fails.
const resultsInfoTimeout = 2 * time.Second

// resultsBound is the results stream's max_bytes as last looked up, and when.
type resultsBound struct {
	mu    sync.Mutex
	bytes int64
	at    time.Time // on this host's clock
	known bool
}

// resultsMaxBytes is the results stream's max_bytes (≤ 0: none), looked up again once what was
// last found is older than resultsInfoEvery. Answers sized meanwhile use the bound last known
// (the one found at start before the first look-up answers, or when it fails).
func (e *Executor) resultsMaxBytes() int64 {
	if e.st == nil || e.st.results == nil {
		return 0
	}
	every := resultsInfoEvery
	if e.cfg.hooks.resultsInfoEvery != 0 {
		every = e.cfg.hooks.resultsInfoEvery
	}
	b := &e.resultsBound
	b.mu.Lock()
	if !b.known {
		b.bytes, b.known = e.st.results.CachedInfo().Config.MaxBytes, true
	}
	bytes, stale := b.bytes, b.at.IsZero() || time.Since(b.at) >= every
	if stale {
		b.at = time.Now() // one look-up at a time; after a failure, the next in resultsInfoEvery
	}
	b.mu.Unlock()
	if !stale {
		return bytes
	}
	ctx, cancel := context.WithTimeout(context.Background(), resultsInfoTimeout)
	defer cancel()
	info, err := e.st.results.Info(ctx)
	if err != nil {
		return bytes
	}
	b.mu.Lock()
	b.bytes = info.Config.MaxBytes
	b.mu.Unlock()
	return info.Config.MaxBytes
}

// maxAnswer is the size of the largest answer message: the connection's max_payload, at most
// subjects.MaxEventBytes (the results stream's message size).
func (e *Executor) maxAnswer() int {
	mp := subjects.MaxEventBytes
	if p := int(e.nc.MaxPayload()); p > 0 {
		mp = min(mp, p)
	}
	return mp
}

// resultFits reports whether a result of n bytes fits in the answer res of the request at seq
// (n ≤ resultRoom), without encoding the answer to count its envelope when n is well within the
// message size: that envelope is at most answerEnvelope(res) bytes.
func (e *Executor) resultFits(res subjects.CallResult, seq uint64, n int) bool {
	mp := e.maxAnswerOf(res)
	if res.Error == nil && n <= mp-answerEnvelope(res)-answerSlack {
		return true
	}
	return n <= answerRoom(mp, res, seq)
}

// answerEnvelope bounds what an answer without an error holds besides its result, headers
// included (see answerRoom): JSON escapes a byte to at most 6, a subject token (the Nats-Msg-Id
// header) to 3; the rest (member names, numbers, times, header names) is well under 1 KiB.
func answerEnvelope(res subjects.CallResult) int {
	return 1<<10 + 9*(len(res.ID)+len(res.Tenant)+len(res.Tool))
}

// answerRoom is resultRoom for answers of at most mp bytes.
func answerRoom(mp int, res subjects.CallResult, seq uint64) int {
	res.Status, res.Result, res.FinishedAt = subjects.CallOK, nil, time.Now().UTC()
	env, err := encodeResult(res)
	if err != nil {
		return math.MaxInt // (not expected: nothing here fails to encode)
	}
	msg := resultMsg(seq, res, env)
	return mp - (msg.Size() - len(msg.Subject)) - len(`,"result":`) - answerSlack
}

// isAnswerOf reports whether data is a CallResult of call id (as getResult reads it).
func isAnswerOf(data []byte, id string) bool {
	var res subjects.CallResult
	return json.Unmarshal(data, &res) == nil && res.ID == id
}

// notSent reports whether a dispatch error code means the call never reached the server.
func notSent(code string) bool {
	return code == subjects.CodeUnavailable || code == subjects.CodeNotFound || code == subjects.CodeBadRequest ||
		code == subjects.CodeStale || // refused by dispatch itself (revoked since admission)
		code == subjects.CodeTooLarge // a dispatch request NATS cannot carry
}

// neverSent reports whether rep, a Dispatcher's answer, says that the request never left the
// connector (its server not connected or disconnecting, no connector serving it, the deadline
// passed before sending, a request NATS cannot carry): DispatchReply.NotSent, or, from a
// connector older than that field, a refusal whose code says nothing ran (notSent) and whose
// message says "nothing was sent". A server's own refusal (HTTP 429 and the like: "nothing
// ran") reached the server: that call counts against the limits.
func neverSent(rep subjects.DispatchReply) bool {
	if rep.Error == nil {
		return false
	}
	if rep.NotSent {
		return notSent(rep.Error.Code)
	}
	// (A server's refusal, "the server refused the request with HTTP 429 ...; nothing ran: ",
	// ends with the server's own words, which may say anything.)
	return notSent(rep.Error.Code) && strings.Contains(rep.Error.Message, "nothing was sent") &&
		!strings.HasPrefix(rep.Error.Message, "the server refused")
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 1 && b[0] == '{' && json.Valid(b)
}

// isToolError reports whether an MCP result says isError: true.
func isToolError(result []byte) bool {
	if len(result) == 0 || !bytes.Contains(result, []byte(`"isError"`)) && !redact.EscapesASCII(result) {
		return false // not even spelled with escapes ("\u0069sError")
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// relistGroup makes concurrent re-lists of one server one request: calls that find the same
// expired list wait for the same answer.
type relistGroup struct {
	mu      sync.Mutex
	pending map[string]*relistCall
}

type relistCall struct {
	done chan struct{}
	rep  relisted
}

// relisted is a re-list's reply, with the registry view's generation when it was asked (see
// registry.generation): the reply's sequence is of the stream the view then followed.
type relisted struct {
	subjects.RelistReply
	gen uint64
}

func (g *relistGroup) do(server string, fn func() relisted) relisted {
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[string]*relistCall{}
	}
	if c, ok := g.pending[server]; ok {
		g.mu.Unlock()
		<-c.done
		return c.rep
	}
	c := &relistCall{done: make(chan struct{})}
	g.pending[server] = c
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.pending, server)
		g.mu.Unlock()
		close(c.done)
	}()
	c.rep = fn()
	return c.rep
}
