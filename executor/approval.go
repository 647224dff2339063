package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// approval holds a call in needs_approval until an Approval arrives on
// subjects.Approvals(tenant, id),
// the timeout passes, or the executor stops (the call is then handed to another worker). It
// returns nil when approved.
func (e *Executor) approval(ctx context.Context, c *call) *stop {
	wait := e.cfg.ApprovalTimeout
	switch ms := c.req.ApprovalTimeoutMs; {
	case ms < 0:
		return refused(subjects.CodeNeedsApproval, c.tool.Public+" needs approval and the request asked not to wait (approvalTimeoutMs -1)")
	case ms > 0:
		wait = min(time.Duration(ms)*time.Millisecond, e.cfg.MaxApprovalTimeout)
	}

	decided := make(chan subjects.Approval, 1)
	sub, err := e.nc.Subscribe(subjects.Approvals(c.tenant, c.req.ID), func(m *nats.Msg) {
		reply := func(r subjects.ApprovalReply) {
			r.V = subjects.Version
			if m.Reply != "" {
				data, _ := json.Marshal(r)
				m.Respond(data)
			}
		}
		var a subjects.Approval
		if err := json.Unmarshal(m.Data, &a); err != nil {
			reply(subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: "approval is not a valid Approval JSON object"}})
			return
		}
		switch {
		case a.ID != "" && a.ID != c.req.ID:
			reply(subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: fmt.Sprintf("approval id %q does not match the subject's call id", a.ID)}})
			return
		case a.Tenant != "" && a.Tenant != c.tenant:
			// Another tenant's call with the same id may be waiting: not this one's business.
			return
		}
		select {
		case decided <- a:
			reply(subjects.ApprovalReply{OK: true})
		default:
			reply(subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeBadRequest, Message: "call " + c.req.ID + " was already decided"}})
		}
	})
	if err != nil {
		return &stop{err: fmt.Errorf("%w: subscribe approvals: %w", errRetry, err)}
	}
	defer sub.Unsubscribe()

	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.CodeNeedsApproval, Code: subjects.CodeNeedsApproval,
		Message: fmt.Sprintf("%s needs approval: mcpstream approve %s (or deny) within %s", c.tool.Public, c.req.ID, wait)}))

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case a := <-decided:
		by := a.By
		if by == "" {
			by = "an approver"
		}
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
	case <-timer.C:
		return refused(subjects.CodeApprovalTimeout, fmt.Sprintf("no approval for %s within %s", c.tool.Public, wait))
	case <-e.stopping:
		return &stop{err: errStopping}
	case <-ctx.Done():
		return &stop{err: errStopping}
	}
}
