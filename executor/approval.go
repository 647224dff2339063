package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// The states of a call waiting in needs_approval. It leaves approvalWaiting once, by a
// CompareAndSwap: to approvalDecided when an approval message wins (its approver is then told
// OK, and the call takes that decision whatever happens next), or to approvalExpired
// (the timeout passed) or approvalHandedBack (the executor stops, or ctx is done) when the
// waiting call gives up first (approvers are then told the call no longer waits).
const (
	approvalWaiting int32 = iota
	approvalDecided
	approvalExpired
	approvalHandedBack
)

// approvalWait is the state shared by a call waiting in needs_approval and the handler of its
// approvals subject.
type approvalWait struct {
	id, tenant string
	state      atomic.Int32
	decided    chan subjects.Approval // the decision: sent once, by the handler that won waiting → decided
}

func newApprovalWait(c *call) *approvalWait {
	return &approvalWait{id: c.req.ID, tenant: c.tenant, decided: make(chan subjects.Approval, 1)}
}

// answer handles the data of one approval message and returns the reply to its sender; false
// when the message gets no reply (another tenant's approval). The reply is OK only when this
// approval decided the call. An approval must say "approve": true or false: without it (or
// with null) it would decode as a denial, so any JSON object would decide the call.
func (w *approvalWait) answer(data []byte) (subjects.ApprovalReply, bool) {
	var a subjects.Approval
	var given struct {
		Approve *bool `json:"approve"`
	}
	if err := subjects.Decode(data, &a); err != nil || json.Unmarshal(data, &given) != nil {
		msg := "approval is not a valid Approval JSON object"
		if err != nil {
			msg += ": " + truncateString(err.Error(), 200)
		}
		return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: msg}}, true
	}
	switch {
	case a.V != 0 && a.V != subjects.Version:
		return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("unsupported version v=%d (this executor speaks v=%d)", a.V, subjects.Version)}}, true
	case a.ID != "" && a.ID != w.id:
		return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("approval id %q does not match the subject's call id", a.ID)}}, true
	case a.Tenant != "" && a.Tenant != w.tenant:
		// Another tenant's call with the same id may be waiting: not this one's business.
		return subjects.ApprovalReply{}, false
	case given.Approve == nil:
		return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: `approval must say "approve": true (approve) or false (deny); nothing was decided`}}, true
	}
	if !w.state.CompareAndSwap(approvalWaiting, approvalDecided) {
		switch w.state.Load() {
		case approvalExpired:
			return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeApprovalTimeout, Message: "call " + w.id + " no longer waits for approval: it timed out"}}, true
		case approvalHandedBack:
			return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "call " + w.id + " no longer waits for approval here: its executor is stopping and hands it to another (decide again once it waits again)"}}, true
		default:
			return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: "call " + w.id + " was already decided"}}, true
		}
	}
	w.decided <- a // never blocks: only the winner of the CompareAndSwap sends, once
	return subjects.ApprovalReply{OK: true}, true
}

// approvalHint is the message of the needs_approval audit event: what an approver runs. The
// caller chose the call id (any bytes), and an approver pastes the command into a shell: the id
// and tenant are quoted for a POSIX shell, and an id that starts with "-" (approve would read it
// as a flag) comes after "--", the flags before it.
func approvalHint(c *call, wait time.Duration) string {
	tenant := ""
	if c.tenant != policy.Local.Tenant {
		tenant = " --tenant " + shellQuote(c.tenant)
	}
	args := shellQuote(c.req.ID) + tenant
	if strings.HasPrefix(c.req.ID, "-") {
		args = strings.TrimPrefix(tenant+" -- "+shellQuote(c.req.ID), " ")
	}
	return fmt.Sprintf("%s needs approval: mcpstream approve %s (or deny) within %s", c.tool.Public, args, wait)
}

// shellQuote quotes s as one word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@/", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// giveUp ends the wait (to approvalExpired or approvalHandedBack) unless an approval decided the
// call first: it then returns that decision, true, and the call must take it (its approver was
// told OK).
func (w *approvalWait) giveUp(to int32) (subjects.Approval, bool) {
	if w.state.CompareAndSwap(approvalWaiting, to) {
		return subjects.Approval{}, false
	}
	return <-w.decided, true // the winner sends right after its CompareAndSwap
}

// approval holds a call in needs_approval until an Approval arrives on
// subjects.Approvals(tenant, id),
// the timeout passes, or the executor stops (the call is then handed to another worker). It
// returns nil when approved. An approver is told OK only if the call takes its decision.
func (e *Executor) approval(ctx context.Context, c *call) *stop {
	if c.req.ApprovalTimeoutMs < 0 {
		return refused(subjects.CodeNeedsApproval, c.tool.Public+" needs approval and the request asked not to wait (approvalTimeoutMs -1)")
	}
	wait := requestWait(c.req.ApprovalTimeoutMs, e.cfg.ApprovalTimeout, e.cfg.MaxApprovalTimeout)
	// A waiting call holds its worker, and workers serve every tenant: past MaxApprovalWaits,
	// one tenant's pending approvals would stop everyone's calls for up to an hour.
	select {
	case e.approvalWaits <- struct{}{}:
		defer func() { <-e.approvalWaits }()
	default:
		s := refused(subjects.CodeRateLimited, fmt.Sprintf("%s needs approval, and %d calls already wait for approval on this executor (its limit, so that calls needing none are served); nothing was run: try again later",
			c.tool.Public, cap(e.approvalWaits)))
		s.e.RetryAfterMs = approvalWaitRetryAfter.Milliseconds()
		return s
	}

	w := newApprovalWait(c)
	sub, err := e.nc.Subscribe(subjects.Approvals(c.tenant, c.req.ID), func(m *nats.Msg) {
		if m.Reply != "" && !subjects.Answerable(m.Reply) {
			return // its reply would be written to a subject of mcpstream or the server: nothing decided
		}
		r, ok := w.answer(m.Data)
		if !ok || m.Reply == "" {
			return
		}
		r.V = subjects.Version
		data, _ := json.Marshal(r)
		m.Respond(data)
	})
	if err != nil {
		return &stop{err: fmt.Errorf("%w: subscribe approvals: %w", errRetry, err)}
	}
	// Drained, not just unsubscribed: an approval already on its way when the wait ends is still
	// answered (no longer waiting, and why) instead of leaving its sender to its timeout.
	defer sub.Drain()

	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.CodeNeedsApproval, Code: subjects.CodeNeedsApproval,
		Message: approvalHint(c, wait)}))

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case a := <-w.decided:
		return e.approvalDecision(c, a)
	case <-timer.C:
		if a, ok := w.giveUp(approvalExpired); ok {
			return e.approvalDecision(c, a)
		}
		return refused(subjects.CodeApprovalTimeout, fmt.Sprintf("no approval for %s within %s", c.tool.Public, wait))
	case <-e.stopping:
		if a, ok := w.giveUp(approvalHandedBack); ok {
			return e.approvalDecision(c, a)
		}
		return &stop{err: errStopping}
	case <-ctx.Done():
		if a, ok := w.giveUp(approvalHandedBack); ok {
			return e.approvalDecision(c, a)
		}
		return &stop{err: errStopping}
	}
}

// approvalWaitRetryAfter is the retry-after of a call refused because too many calls wait for
// approval.
const approvalWaitRetryAfter = 5 * time.Second

// Caps of an approval's by and reason in the call's answer and audit events: the approval
// message may be as large as NATS carries, and an answer past what the results stream takes is
// never stored (the call would go back to the queue and wait for approval again).
const (
	maxApprovalBy     = subjects.MaxUserBytes
	maxApprovalReason = 4 << 10
)

// approvalDecision is the outcome of a call decided by a: nil when approved.
func (e *Executor) approvalDecision(c *call, a subjects.Approval) *stop {
	by := truncateString(a.By, maxApprovalBy)
	if by == "" {
		by = "an approver"
	}
	a.Reason = truncateString(a.Reason, maxApprovalReason)
	if !a.Approve {
		msg := "denied by " + by
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return refused(subjects.CodeDenied, msg)
	}
	msg := "approved by " + by
	if a.Reason != "" {
		msg += ": " + a.Reason
	}
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.DecisionApproved, Message: msg}))
	return nil
}
