package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	// settle, when set, records the call's outcome (approved, denied, expired) in its approval
	// record, shared by every delivery of the call: it returns the record and true when another
	// delivery's outcome was recorded first (that one is the call's). Called once, by whoever
	// won the way out of waiting.
	settle func(outcome string, a subjects.Approval) (approvalRecord, bool)
	// elsewhere is the outcome another delivery of the call recorded first (see settle): set
	// before the decision is sent on decided, or before giveUp returns.
	elsewhere *approvalRecord
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
			// No call waits any more (its waiter leaves a moment later, and then NATS answers no
			// responders): not_found, as `approve` and Client.Decide (ErrNoWaiter) report it.
			return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeNotFound, Message: "call " + w.id + " was already decided"}}, true
		}
	}
	if w.settle != nil {
		if rec, lost := w.settle(outcomeOf(a), a); lost {
			// Another delivery of this call (its heartbeats were lost and JetStream delivered it
			// again, both waiting here) recorded its outcome first: that is the call's. Told OK
			// only when it is this very decision (the same message reached both).
			w.elsewhere = &rec
			w.decided <- a
			switch {
			case rec.Outcome == outcomeOf(a) && rec.By == truncateString(a.By, maxApprovalBy) && rec.Reason == truncateString(a.Reason, maxApprovalReason):
				return subjects.ApprovalReply{OK: true}, true
			case rec.Outcome == outcomeExpired:
				return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeApprovalTimeout, Message: "call " + w.id + " no longer waits for approval: it timed out"}}, true
			default:
				return subjects.ApprovalReply{Error: &subjects.Error{Code: subjects.CodeNotFound, Message: "call " + w.id + " was already decided (" + rec.Outcome + ")"}}, true
			}
		}
	}
	w.decided <- a // never blocks: only the winner of the CompareAndSwap sends, once
	return subjects.ApprovalReply{OK: true}, true
}

// The outcomes of an approval record.
const (
	outcomeApproved = "approved"
	outcomeDenied   = "denied"
	outcomeExpired  = "expired"
)

func outcomeOf(a subjects.Approval) string {
	if a.Approve {
		return outcomeApproved
	}
	return outcomeDenied
}

// approvalRecord is a request's approval wait, kept in the claims bucket (approvalKey) for every
// delivery of the request: when it began, and how it ended. A call delivered again (handed back
// by a stopping executor, or its heartbeats lost) waits only what is left of its approval
// timeout, and two deliveries waiting at once take one outcome: the first recorded. Another
// request of the call id (a resend past the calls stream's de-duplication window, with any tool
// and arguments) has its own record: an approval is never taken from another request's.
type approvalRecord struct {
	// Since is the call's first needs_approval (on the clock of the executor that held it).
	Since time.Time `json:"since"`
	Seq   uint64    `json:"seq,omitempty"` // the calls stream sequence of the request that began the wait
	// Outcome is "" while the call waits, else approved, denied or expired; At when, Delivery by
	// which delivery of request Seq, By and Reason the approval's (cut as in the answer).
	Outcome  string    `json:"outcome,omitempty"`
	At       time.Time `json:"at,omitzero"`
	Delivery uint64    `json:"delivery,omitempty"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// HandedBack: approved, and handed back by a delivery that never dispatched it (its
	// executor stopped while it waited for a concurrency slot, see handBackApproved): the next
	// delivery goes on as approved at once.
	HandedBack bool `json:"handedBack,omitempty"`
	// Definition is the definitionDigest of the tool definition the call was approved under
	// (approved only): a delivery holding another definition does not run it.
	Definition string `json:"definition,omitempty"`

	// stored is the record's timestamp on the NATS server's clock when read back (not part of
	// the record); of a record with an outcome, when the outcome was written (see
	// decidedElsewhere).
	stored time.Time
}

// approvalKey is the claims-bucket key of the approval record of the request at calls stream
// sequence seq of a call (a claim key has two tokens: this one four).
func approvalKey(tenant, id string, seq uint64) string {
	return claimKey(tenant, id) + ".approval." + strconv.FormatUint(seq, 10)
}

// approvalStore bounds each read or write of an approval record.
const approvalStore = 5 * time.Second

// beginApproval reads the call's approval record, or creates it (the wait begins now). ok is
// false when the record could not be read or written (the wait is then this delivery's alone,
// as before approval records); rev is the record's revision, stored its timestamp on the NATS
// server's clock when it was read back (zero when this delivery created it).
func (e *Executor) beginApproval(ctx context.Context, c *call) (rec approvalRecord, rev uint64, stored time.Time, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, approvalStore)
	defer cancel()
	key := approvalKey(c.tenant, c.req.ID, c.seq)
	rec = approvalRecord{Since: time.Now().UTC(), Seq: c.seq}
	val, _ := json.Marshal(rec)
	rev, err := e.st.claims.Create(ctx, key, val)
	if err == nil {
		return rec, rev, time.Time{}, true
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		entry, gerr := e.st.claims.Get(ctx, key)
		var cur approvalRecord
		if gerr == nil && json.Unmarshal(entry.Value(), &cur) == nil && !cur.Since.IsZero() {
			cur.stored = entry.Created()
			return cur, entry.Revision(), entry.Created(), true
		}
		err = cmp.Or(gerr, errors.New("malformed approval record"))
	}
	e.cfg.Log.Warn().Err(err).Str("call", e.logText(c.req.ID)).Msg("approval record not kept: this delivery's approval wait starts now")
	return approvalRecord{Since: time.Now().UTC(), Seq: c.seq}, 0, time.Time{}, false
}

// approvalGateKey is the claims-bucket key of the call id's approval gate: the calls stream
// sequence of the request of the id whose approval wait holds the id's approvals subject.
func approvalGateKey(tenant, id string) string {
	return claimKey(tenant, id) + ".approval.gate"
}

// approvalConflict reports whether another request of c's call id (a resend past the calls
// stream's de-duplication window), for another call — another tool, other arguments or another
// principal — waits for approval. Both would wait on the id's approvals subject, and the approval
// given to one decide both. The request that takes the id's gate (approvalGateKey, created
// atomically) is the one that waits; another finds it there and is told of a conflict while the
// gate's holder still waits: its approval record holds no outcome, its wait may not have ended
// yet (MaxApprovalTimeout since it began), and it is still on the calls stream. A gate whose
// holder no longer waits is taken over (by its revision: of two requests, one). A resend of the
// same call may wait too (one decision for both is the one they need; the claim runs it once),
// and the holder itself delivered again goes on.
//
// Deciding by one key, not by listing the requests' records and each looking for earlier ones:
// two requests taken at once each looked before the other had written its record, and both
// waited.
func (e *Executor) approvalConflict(ctx context.Context, c *call) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, approvalStore)
	defer cancel()
	key := approvalGateKey(c.tenant, c.req.ID)
	val := []byte(strconv.FormatUint(c.seq, 10))
	// (A bucket that refuses the gate, full, refuses it again at once: the wait goes on
	// without it, as it does without an approval record, rather than the call going back to
	// the queue again and again.)
	unkept := func(err error) (bool, error) {
		if subjects.StoreRefused(err) {
			e.cfg.Log.Warn().Err(err).Str("call", e.logText(c.req.ID)).Msg("approval gate not kept: another request of the call id may wait at once")
			return false, nil
		}
		return false, err
	}
	for range 5 {
		_, err := e.st.claims.Create(ctx, key, val)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return unkept(err)
		}
		entry, err := e.st.claims.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // (gone meanwhile: its TTL)
		}
		if err != nil {
			return false, err
		}
		holder, perr := strconv.ParseUint(string(entry.Value()), 10, 64)
		if perr == nil && holder == c.seq {
			return false, nil // this request's: a delivery again
		}
		if perr == nil {
			waits, same, err := e.requestWaits(ctx, c, holder)
			if err != nil {
				return false, err
			}
			if waits {
				return !same, nil
			}
		}
		// Its holder no longer waits: this request takes the gate, unless another did first.
		_, err = e.st.claims.Update(ctx, key, val, entry.Revision())
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return unkept(err)
		}
	}
	return false, errors.New("the call id's approval gate kept changing")
}

// requestWaits reports whether the request at calls stream sequence seq of c's call id may
// still wait for approval, and whether it asks for the same call as c.
func (e *Executor) requestWaits(ctx context.Context, c *call, seq uint64) (waits, same bool, err error) {
	entry, err := e.st.claims.Get(ctx, approvalKey(c.tenant, c.req.ID, seq))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// (Its record is written right after the gate: it may be about to begin its wait.)
	case err != nil:
		return false, false, err
	default:
		var rec approvalRecord
		if json.Unmarshal(entry.Value(), &rec) == nil && (rec.Outcome != "" || !time.Now().Before(e.storedDeadline(ctx, rec.Since, entry.Created(), e.cfg.MaxApprovalTimeout))) {
			return false, false, nil
		}
	}
	calls, err := e.js.Stream(ctx, subjects.CallsStream)
	if err != nil {
		return false, false, err
	}
	m, err := calls.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, false, nil // answered and acknowledged: it no longer waits
	}
	if err != nil {
		return false, false, err
	}
	var other subjects.CallRequest
	if m.Subject != subjects.Calls(c.tenant) || subjects.Decode(m.Data, &other) != nil || other.ID != c.req.ID {
		return false, false, nil // not a request of this id
	}
	return true, sameCall(c.tenant, other, c.req), nil
}

// sameCall reports whether two requests of a call id of tenant ask for the same call: the same
// tool, with the same arguments, for the same principal. The arguments are the same JSON value
// however written (sameJSON: members in any order, whitespace, a number's or a string's
// spelling), as a client that encodes its request again (from a map, say) writes it; arguments
// that are no single value (not JSON, a member named twice) are never the same, nor are
// arguments given and arguments left out.
func sameCall(tenant string, a, b subjects.CallRequest) bool {
	return a.Tool == b.Tool && (len(a.Arguments) == 0 && len(b.Arguments) == 0 || len(a.Arguments) > 0 && len(b.Arguments) > 0 && sameJSON(a.Arguments, b.Arguments)) &&
		cmp.Or(a.Principal.Tenant, tenant) == cmp.Or(b.Principal.Tenant, tenant) && a.Principal.User == b.Principal.User &&
		slices.Equal(a.Principal.Roles, b.Principal.Roles)
}

// settler is approvalWait.settle for the record rec at revision rev, written by delivery
// c.delivery of c.
func (e *Executor) settler(c *call, rec approvalRecord, rev uint64) func(string, subjects.Approval) (approvalRecord, bool) {
	def := c.tool.definitionDigest() // (what the approver is asked about)
	return func(outcome string, a subjects.Approval) (approvalRecord, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), approvalStore)
		defer cancel()
		key := approvalKey(c.tenant, c.req.ID, c.seq)
		next := rec
		next.Outcome, next.At, next.Delivery = outcome, time.Now().UTC(), c.delivery
		if outcome == outcomeApproved {
			next.Definition = def
		}
		next.By, next.Reason = truncateString(a.By, maxApprovalBy), truncateString(a.Reason, maxApprovalReason)
		val, _ := json.Marshal(next)
		for range 3 {
			_, err := e.st.claims.Update(ctx, key, val, rev)
			if err == nil {
				return next, false
			}
			if !errors.Is(err, jetstream.ErrKeyExists) {
				// Not recorded: this delivery decides alone (the claim still keeps a
				// side-effecting call from running twice).
				e.cfg.Log.Warn().Err(err).Str("call", e.logText(c.req.ID)).Msg("approval outcome not recorded")
				return next, false
			}
			entry, gerr := e.st.claims.Get(ctx, key)
			var cur approvalRecord
			if gerr != nil || json.Unmarshal(entry.Value(), &cur) != nil {
				e.cfg.Log.Warn().Err(gerr).Str("call", e.logText(c.req.ID)).Msg("approval outcome not recorded")
				return next, false
			}
			switch {
			case cur.Outcome == "":
				rev = entry.Revision() // (written again while waiting: not an outcome)
			case cur.Delivery == c.delivery && cur.Seq == next.Seq && cur.Outcome == outcome:
				return cur, false // this delivery's own write (its PubAck lost)
			default:
				cur.stored = entry.Created()
				return cur, true
			}
		}
		return next, false
	}
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
//
// A wait that expires records it (settle): when another delivery of the call recorded its
// outcome first, giveUp returns true with w.elsewhere set.
func (w *approvalWait) giveUp(to int32) (subjects.Approval, bool) {
	if w.state.CompareAndSwap(approvalWaiting, to) {
		if to == approvalExpired && w.settle != nil {
			if rec, lost := w.settle(outcomeExpired, subjects.Approval{}); lost {
				w.elsewhere = &rec
				return subjects.Approval{}, true
			}
		}
		return subjects.Approval{}, false
	}
	return <-w.decided, true // the winner sends right after its CompareAndSwap
}

// approval holds a call in needs_approval until an Approval arrives on
// subjects.Approvals(tenant, id),
// the timeout passes, or the executor stops (the call is then handed to another worker). It
// returns nil when approved. An approver is told OK only if the call takes its decision.
func (e *Executor) approval(ctx context.Context, c *call) (s *stop) {
	if c.req.ApprovalTimeoutMs < 0 {
		return refused(subjects.CodeNeedsApproval, c.tool.Public+" needs approval and the request asked not to wait (approvalTimeoutMs -1)")
	}
	wait := requestWait(c.req.ApprovalTimeoutMs, e.cfg.ApprovalTimeout, e.cfg.MaxApprovalTimeout)
	// A waiting call holds its worker, and workers serve every tenant: past MaxApprovalWaits,
	// one tenant's pending approvals would stop everyone's calls for up to an hour. An approved
	// call keeps its place until it has its concurrency slots (it may wait for them: see
	// slotsWhenFree); any other outcome gives it back now.
	defer func() {
		if s != nil {
			e.endWait(c)
		}
	}()
	if !e.takeWaitPlace(c) && !c.redelivered {
		return e.noWaitPlace(c)
	}
	// A request delivered again may find no place and still wait for nobody: its approval
	// record holds its outcome (approved and handed back, say: its approver was told OK), or its
	// approval timeout passed meanwhile. It takes that outcome below, and is refused for want of
	// a place only when it would wait for a human again. (Refused at once, an approved call was
	// answered rate_limited, its approval thrown away.)

	// Approvals name a call id, not a request: another request of the id waiting too would
	// take the approval given to this one (or this one the other's), whatever its tool and
	// arguments. The request that took the id's gate waits; another one for another call is
	// refused while it does.
	if f := e.cfg.hooks.approvalCheck; f != nil {
		f(c.req.ID, c.seq)
	}
	if waits, err := e.approvalConflict(ctx, c); err != nil {
		return &stop{err: fmt.Errorf("%w: look up approval records: %w", errRetry, err)}
	} else if waits {
		// Not the id's answer: stored, it would be the earlier request's too (its caller reads
		// the id's results subject), and the answer of that request, approved and run, lost.
		s := refused(subjects.CodeBadRequest, fmt.Sprintf("call id %q already waits for approval as another call (another tool, other arguments or another principal): an approval of the id would decide both; use a new call id", c.req.ID))
		s.replyOnly = true
		return s
	}

	// The wait counts from the call's first needs_approval, over every delivery (see
	// approvalRecord); an outcome recorded already is the call's.
	rec, rev, stored, recorded := e.beginApproval(ctx, c)
	w := newApprovalWait(c)
	if recorded {
		w.settle = e.settler(c, rec, rev)
	}
	if rec.Outcome != "" {
		if !c.waitPlace && rec.Outcome == outcomeApproved {
			// (Best effort: approved, it counts among the waiting calls while it waits for
			// its concurrency slots, as its first delivery did; none free, it goes on without,
			// holding a worker no place counts: see README, a trade against throwing its
			// approval away.)
			e.takeWaitPlace(c)
		}
		e.decided(c, true)
		return e.decidedElsewhere(ctx, c, rec, wait)
	}
	// (Since is on the clock of the executor that began the wait: see storedDeadline.)
	deadline := e.storedDeadline(ctx, rec.Since, stored, wait)
	if !time.Now().Before(deadline) {
		// Its approval timeout passed while it was handed to another executor: not asked again.
		if _, ok := w.giveUp(approvalExpired); ok {
			e.decided(c, true)
			return e.decidedElsewhere(ctx, c, *w.elsewhere, wait)
		}
		return refused(subjects.CodeApprovalTimeout, fmt.Sprintf("no approval for %s within %s", c.tool.Public, wait))
	}
	if !c.waitPlace && !e.takeWaitPlace(c) && !(c.redelivered && e.copyWaits(c)) {
		// (A copy of this request that still waits elsewhere, its executor's heartbeats lost,
		// is waited with, place or none: a refusal stored now would be the call's answer,
		// "nothing was run", while that copy, approved, runs it. Such copies are rare; a call
		// handed back by a stopping executor has none.)
		return e.noWaitPlace(c)
	}
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

	left := wait
	if rec.Seq != c.seq || c.redelivered {
		left = max(time.Until(deadline).Round(time.Second), time.Second) // what is left of it
	}
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.CodeNeedsApproval, Code: subjects.CodeNeedsApproval,
		Message: approvalHint(c, left)}))

	decide := func(a subjects.Approval) *stop {
		if w.elsewhere != nil {
			e.decided(c, true)
			return e.decidedElsewhere(ctx, c, *w.elsewhere, wait)
		}
		e.decided(c, false)
		return e.approvalDecision(c, a)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case a := <-w.decided:
		return decide(a)
	case <-timer.C:
		if a, ok := w.giveUp(approvalExpired); ok {
			return decide(a)
		}
		return refused(subjects.CodeApprovalTimeout, fmt.Sprintf("no approval for %s within %s", c.tool.Public, wait))
	case <-e.stopping:
		if a, ok := w.giveUp(approvalHandedBack); ok {
			return decide(a)
		}
		return &stop{err: errStopping}
	case <-ctx.Done():
		if a, ok := w.giveUp(approvalHandedBack); ok {
			return decide(a)
		}
		return &stop{err: errStopping}
	}
}

// approvalProbeTimeout bounds copyWaits' request.
const approvalProbeTimeout = 2 * time.Second

// copyWaits reports whether a copy of c (another delivery of its request, whose executor's
// heartbeats were lost, or a resend of the same call) waits for approval on c's approvals
// subject now. It asks with an approval that decides nothing (no "approve": every waiter answers
// bad_request); only no responders says that none waits.
//
// No answer at all (a copy whose connection stalls, the very case of lost heartbeats; NATS slow;
// or this executor's NATS user may not publish on the approvals subjects, so NATS drops every
// probe) is taken for a copy that waits, and warned: the call then waits without a place, and
// with the permission missing every call delivered again that finds none free does.
func (e *Executor) copyWaits(c *call) bool {
	probe, _ := json.Marshal(struct {
		V  int    `json:"v"`
		ID string `json:"id"`
	}{subjects.Version, c.req.ID})
	subject := subjects.Approvals(c.tenant, c.req.ID)
	_, err := e.nc.Request(subject, probe, approvalProbeTimeout)
	if errors.Is(err, nats.ErrNoResponders) {
		return false
	}
	if err != nil {
		e.cfg.Log.Warn().Err(err).Str("call", e.logText(c.req.ID)).Str("subject", e.logRedacted(subject)).
			Msg("no answer to the probe for another copy of this call waiting for approval (a copy whose connection stalls, NATS slow, or this executor's NATS user may not publish on " +
				subjects.Root + ".approvals.*.*): taken as waiting, the call waits without a place among the calls waiting for approval (MaxApprovalWaits)")
	}
	return true
}

// takeWaitPlace takes a place among the calls waiting in this process (MaxApprovalWaits) for c,
// if one is free.
func (e *Executor) takeWaitPlace(c *call) bool {
	select {
	case e.approvalWaits <- struct{}{}:
		c.waitPlace = true
		return true
	default:
		return false
	}
}

// noWaitPlace is the refusal of a call that would wait for approval when MaxApprovalWaits calls
// already wait in this process.
func (e *Executor) noWaitPlace(c *call) *stop {
	s := refused(subjects.CodeRateLimited, fmt.Sprintf("%s needs approval, and %d calls already wait for approval on this executor (its limit, so that calls needing none are served); nothing was run: try again later",
		c.tool.Public, cap(e.approvalWaits)))
	s.e.RetryAfterMs = approvalWaitRetryAfter.Milliseconds()
	return s
}

// endWait gives back c's place among the calls waiting in this process (MaxApprovalWaits), if
// it holds one; once only.
func (e *Executor) endWait(c *call) {
	if c.waitPlace {
		c.waitPlace = false
		<-e.approvalWaits
	}
}

// decided calls the approvalDecided hook, if set (tests).
func (e *Executor) decided(c *call, elsewhere bool) {
	if f := e.cfg.hooks.approvalDecided; f != nil {
		f(c.req.ID, c.delivery, elsewhere)
	}
}

// decidedElsewhere is the outcome of a request whose approval record holds another delivery's
// outcome, rec: denied and approval_timeout as that one was; approved, the answer of
// the delivery that took the approval, waited for while it may still come (it runs the call:
// this one never does meanwhile), then the call goes on as approved — that delivery died
// before its answer, and the claim decides whether the call may run.
func (e *Executor) decidedElsewhere(ctx context.Context, c *call, rec approvalRecord, wait time.Duration) *stop {
	c.approvedDef = rec.Definition
	by := cmp.Or(rec.By, "an approver")
	why := ""
	if rec.Reason != "" {
		why = ": " + rec.Reason
	}
	switch rec.Outcome {
	case outcomeDenied:
		return refused(subjects.CodeDenied, "denied by "+by+why)
	case outcomeExpired:
		return refused(subjects.CodeApprovalTimeout, fmt.Sprintf("no approval for %s within %s", c.tool.Public, wait))
	}
	if rec.HandedBack {
		// No answer comes: the delivery that went on with the approval handed the call back
		// before dispatching it.
		e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.DecisionApproved,
			Message: "approved by " + by + why + " (taken by an earlier delivery of the call, which handed it back before running it)"}))
		return nil
	}
	due := requestWait(c.req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout) + e.cfg.RelistTimeout + e.cfg.AckWait
	// From the decision's stored timestamp on the NATS server's clock, as in claimUntil: At is
	// on the deciding executor's clock, and one behind by more than due made this delivery go
	// on at once, running a call not claimed (read-only, idempotent) a second time.
	until := e.storedDeadline(ctx, rec.At, rec.stored, due)
	for {
		prev, found, err := e.lookupResult(ctx, c.tenant, c.req.ID)
		if err != nil {
			return &stop{err: fmt.Errorf("%w: look up result: %w", errRetry, err)}
		}
		if found {
			prev.Duplicate = true
			if err := e.answerFor(ctx, c.seq, prev, c.replyTo, nil); err != nil {
				return &stop{err: fmt.Errorf("%w: %w", errRetry, err)}
			}
			return &stop{done: true}
		}
		// Claimed (by that delivery, or by a resend of the call id): the call never runs
		// again, and the claim tells whether its holder's answer may still come (see
		// claimedAnswer) — a holder that left its claim or is gone gives none, and waiting on
		// here took the whole due time for it.
		if s := e.fromClaim(ctx, c); s != nil {
			return s
		}
		if !time.Now().Before(until) {
			break
		}
		select {
		case <-e.stopping:
			return &stop{err: errStopping}
		case <-ctx.Done():
			return &stop{err: errStopping}
		case <-time.After(min(claimWaitPoll, time.Until(until))):
		}
	}
	e.audit.emit(subjects.AuditDecision, c.audit(subjects.AuditEvent{Decision: subjects.DecisionApproved,
		Message: "approved by " + by + why + " (taken by an earlier delivery of the call, which gave no answer)"}))
	return nil
}

// handBackApproved marks the approval record of c, approved, as handed back (HandedBack): this
// delivery went on as approved and hands the call back before dispatching it (its executor
// stops while it waits for a concurrency slot). The next delivery then goes on at once; without
// the mark it waited, in decidedElsewhere, for an answer this one never gives (the call's
// timeout, RelistTimeout and AckWait: past its caller's wait). Not marked (logged), it waits.
func (e *Executor) handBackApproved(c *call) {
	ctx, cancel := context.WithTimeout(context.Background(), approvalStore)
	defer cancel()
	key := approvalKey(c.tenant, c.req.ID, c.seq)
	entry, err := e.st.claims.Get(ctx, key)
	var rec approvalRecord
	if err == nil {
		err = json.Unmarshal(entry.Value(), &rec)
	}
	if err == nil && rec.Outcome != outcomeApproved {
		return // (no record of the approval: this delivery decided alone, nobody waits on it)
	}
	if err == nil {
		rec.HandedBack = true
		val, _ := json.Marshal(rec)
		_, err = e.st.claims.Update(ctx, key, val, entry.Revision())
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		e.cfg.Log.Warn().Err(err).Str("call", e.logText(c.req.ID)).Msg("approved call handed back unmarked: its next delivery waits for an answer first")
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
