package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// waitSlack is added to a call's own bounds for the front end's wait (a redelivery, queueing).
const waitSlack = 10 * time.Second

// onExec serves one request on subjects.ExecAll: each waits on its own goroutine.
func (e *Executor) onExec(m *nats.Msg) {
	if m.Reply != "" && !subjects.Answerable(m.Reply) {
		// The answer would be this executor's write to one of mcpstream's subjects or the
		// server's (another tenant's calls, results, slots, claims): not served, not run.
		e.cfg.Log.Warn().Str("subject", e.logRedacted(m.Subject)).Str("reply", e.logText(m.Reply)).
			Msg("call request dropped: its reply subject is not an inbox but one of mcpstream's or the NATS server's own subjects")
		return
	}
	// The waiting calls are shared by every tenant: one tenant holds at most a quarter of them
	// (its subject's last token; a malformed one is refused in exec), so that its resends or
	// calls answered on non-inbox subjects cannot keep every other tenant out.
	tenant := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	if !e.execWaiting.take(tenant, execTenantShare) {
		e.respond(m, subjects.CallResult{V: subjects.Version, Status: subjects.CallRefused,
			Error: &subjects.Error{Code: subjects.CodeRateLimited, Message: "this executor front end holds too many waiting calls of this tenant", RetryAfterMs: 1000}})
		return
	}
	select {
	case e.execSem <- struct{}{}:
	default:
		e.execWaiting.give(tenant)
		e.respond(m, subjects.CallResult{V: subjects.Version, Status: subjects.CallRefused,
			Error: &subjects.Error{Code: subjects.CodeRateLimited, Message: "this executor front end holds too many waiting calls", RetryAfterMs: 1000}})
		return
	}
	go func() {
		defer func() { <-e.execSem; e.execWaiting.give(tenant) }()
		res, raw, handedOff := e.exec(m)
		if handedOff {
			return // the worker answers m.Reply
		}
		if raw != nil {
			if m.Reply != "" {
				if err := m.Respond(raw); err != nil {
					e.cfg.Log.Debug().Err(err).Msg("exec reply")
				}
			}
			return
		}
		e.respond(m, res)
	}()
}

func (e *Executor) respond(m *nats.Msg, res subjects.CallResult) {
	if m.Reply == "" {
		return
	}
	data, err := encodeResult(res)
	if err != nil {
		data, _ = json.Marshal(subjects.CallResult{V: subjects.Version, ID: res.ID, Tenant: res.Tenant, Tool: res.Tool, Status: subjects.CallFailed,
			Error: &subjects.Error{Code: subjects.CodeInternal, Message: "encode result: " + err.Error()}})
	}
	if err := m.Respond(data); err != nil {
		e.cfg.Log.Debug().Err(err).Msg("exec reply")
	}
}

// exec checks the envelope and persists the request on the calls stream (de-duplicated by its
// id). When the caller's reply subject is an inbox (Config.ReplyPrefixes), the request carries
// it (subjects.HeaderReplyTo) and the worker answers the caller directly: exec reports
// handedOff. Otherwise, and for a resent id, it waits for the terminal answer on the results
// subject (subscribed before the answer can be stored) and returns it decoded, or as the
// stored message's bytes (raw) when it needs no change. A request without a reply subject is
// persisted and not waited for (handedOff): nobody would read its answer.
func (e *Executor) exec(m *nats.Msg) (subjects.CallResult, []byte, bool) {
	tenant, err := subjects.TenantOf(m.Subject)
	if err != nil {
		req, _ := decodeCall(m.Data)
		bad := subjects.TenantRefusal(m.Subject)
		e.auditRefusedEnvelope(m, "", req, bad)
		return subjects.CallResult{V: subjects.Version, Status: subjects.CallRefused, Error: bad}, nil, false
	}
	if len(m.Data) > subjects.MaxCallBytes {
		req, _ := decodeCall(m.Data)
		res := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeTooLarge,
			Message: fmt.Sprintf("call request is %d bytes; the limit is %d", len(m.Data), subjects.MaxCallBytes)})
		e.auditRefusedEnvelope(m, tenant, req, res.Error)
		return res, nil, false
	}
	req, bad := decodeCall(m.Data)
	if bad != nil {
		e.auditRefusedEnvelope(m, tenant, req, bad)
		return refusal(tenant, req, subjects.CallRefused, bad), nil, false
	}

	// The answer's subscription, taken before the answer can be stored: at once when the front
	// end relays it, after publishing for a resend of a call answered directly.
	results := make(chan *nats.Msg, 4)
	subscribe := func() (*nats.Subscription, error) {
		return e.nc.ChanSubscribe(subjects.Result(tenant, req.ID), results)
	}
	direct := e.validReply(m.Reply)
	var sub *nats.Subscription
	if direct == "" && m.Reply != "" {
		if sub, err = subscribe(); err != nil {
			return refusal(tenant, req, subjects.CallFailed, &subjects.Error{Code: subjects.CodeInternal, Message: "subscribe to the result: " + err.Error()}), nil, false
		}
		defer sub.Unsubscribe()
	}

	pub := &nats.Msg{Subject: subjects.Calls(tenant), Data: m.Data, Header: nats.Header{}}
	pub.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID(tenant, req.ID))
	if direct != "" {
		pub.Header.Set(subjects.HeaderReplyTo, direct)
	}
	ack, unknown, err := e.persist(pub)
	// own: a Duplicate PubAck after a publish without one may be of this request's own first
	// publish, not a resend: its answer is not marked duplicate. (It is not handed to the
	// worker either: the stored request may be an earlier resend's, answered elsewhere.)
	own := err == nil && ack.Duplicate && unknown
	if err != nil {
		if code := notPersistedCode(err); code == subjects.CodeTooLarge || publishRefused(err) || errors.As(err, new(*storeFailedError)) {
			// Refused, nothing stored (over the stream's size with its headers, the stream
			// full): no worker records it, the front end does.
			res := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: code, Message: notPersistedMessage(err)})
			e.auditRefusedEnvelope(m, tenant, req, res.Error)
			return res, nil, false
		}
		// Never acknowledged: it may be stored and run all the same, so it is not refused.
		return refusal(tenant, req, subjects.CallFailed, &subjects.Error{Code: subjects.CodeTimeout,
			Message: "JetStream did not acknowledge the call (" + err.Error() + "); it may be persisted and may still complete: read " + subjects.Result(tenant, req.ID)}), nil, false
	}
	if m.Reply == "" {
		// A plain publish: nobody to answer. Persisted, the call is the worker's (its answer
		// goes to the results stream); waiting for it would hold a waiting call for nothing.
		return subjects.CallResult{}, nil, true
	}
	if direct != "" {
		if !ack.Duplicate {
			return subjects.CallResult{}, nil, true // the worker answers the caller
		}
		// A resend: the first request's worker answers the first caller. This one gets the
		// stored answer, or waits for it.
		if sub, err = subscribe(); err != nil {
			return refusal(tenant, req, subjects.CallFailed, &subjects.Error{Code: subjects.CodeInternal, Message: "subscribe to the result: " + err.Error()}), nil, false
		}
		defer sub.Unsubscribe()
	}
	if ack.Duplicate {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, ok, err := getResult(ctx, e.st.results, tenant, req.ID)
		cancel()
		if err == nil && ok {
			res.Duplicate = !own
			return res, nil, false
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		taken := idTaken(ctx, e.js, tenant, req.ID, ack.Sequence)
		cancel()
		if taken {
			return idTakenRefusal(tenant, req), nil, false
		}
		// The first request with this id is still running: its answer comes on the subscription.
	}

	timer := time.NewTimer(e.waitBound(req))
	defer timer.Stop()
	// The answer is also stored on the results stream: a slow call checks it now and then, so
	// an answer the subscription missed (its buffer overrun by junk on the subject, a
	// reconnect) is still delivered long before the bound.
	poll := time.NewTicker(resultPoll)
	defer poll.Stop()
	// another reports whether a results subject message answers another request of this call
	// id (an earlier one, resent once the de-duplication window is past): its answer is this
	// request's only as a duplicate.
	another := func(h nats.Header) bool {
		s := h.Get(subjects.HeaderCallSeq)
		return ack.Duplicate && !own || s != "" && s != strconv.FormatUint(ack.Sequence, 10)
	}
	// stored reads the answer from the results stream, if it is there.
	stored := func() (subjects.CallResult, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, sm, ok, err := storedResult(ctx, e.st.results, tenant, req.ID)
		if err != nil || !ok {
			return res, false
		}
		res.Duplicate = res.Duplicate || another(sm.Header)
		return res, true
	}
	for {
		select {
		case <-poll.C:
			if res, ok := stored(); ok {
				return res, nil, false
			}
		case rm := <-results:
			if !isAnswerOf(rm.Data, req.ID) {
				continue // junk on a results subject is not the answer (as storedResult reads it)
			}
			// What is published on the results subject is not always stored: the results
			// stream refuses every answer of a call id but the first (the answer of a resend
			// once the de-duplication windows are past: a refusal, a read-only tool's new
			// result). The stored answer is the call's; with none stored yet, this one is being
			// stored (a refused one finds the answer it was refused for).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, sm, ok, err := storedResult(ctx, e.st.results, tenant, req.ID)
			cancel()
			switch {
			case err != nil:
				continue // the poll tells
			case !ok || bytes.Equal(sm.Data, rm.Data):
				if !another(rm.Header) {
					return subjects.CallResult{}, rm.Data, false // this request's answer
				}
				if json.Unmarshal(rm.Data, &res) != nil {
					continue
				}
			}
			res.Duplicate = true // a resend's: the answer of an earlier request
			return res, nil, false
		case <-timer.C:
			if res, ok := stored(); ok {
				return res, nil, false
			}
			return refusal(tenant, req, subjects.CallFailed, &subjects.Error{Code: subjects.CodeTimeout,
				Message: "no answer in time; the call is persisted and may still complete: read " + subjects.Result(tenant, req.ID)}), nil, false
		case <-e.stopping:
			return refusal(tenant, req, subjects.CallFailed, &subjects.Error{Code: subjects.CodeTimeout,
				Message: "this executor front end stopped before the answer; the call is persisted and may still complete: read " + subjects.Result(tenant, req.ID)}), nil, false
		}
	}
}

// Bounds of persist.
const (
	persistWait    = 10 * time.Second // for the request's PubAck in all
	persistAttempt = 2 * time.Second  // for the PubAck of one publish
)

// persist publishes a call request to the calls stream and returns its PubAck. A publish without
// a PubAck (the connection dropped under it, JetStream slow to answer) may have been stored: it
// is published again with the same Nats-Msg-Id, which JetStream drops as a duplicate if it was
// (the PubAck then says Duplicate), until one is acknowledged, JetStream refuses it (see
// publishRefused: nothing stored), or persistWait is over (the outcome stays unknown).
//
// A refusal after a publish without a PubAck is that publish's only ("no responders" from a node
// whose JetStream is not up yet, say): the earlier one may be stored and run. It is published
// again too, and if no PubAck comes the error says so without the refusal (publishRefused is
// false of it): the caller is answered timeout, never refused.
func (e *Executor) persist(pub *nats.Msg) (ack *jetstream.PubAck, unknown bool, err error) {
	deadline := time.Now().Add(persistWait)
	// unknown: a publish without a PubAck, so the request may be stored (and a later PubAck
	// that says Duplicate may be of this request's own first publish).
	for {
		ctx, cancel := context.WithTimeout(context.Background(), min(persistAttempt, time.Until(deadline)))
		ack, err = e.js.PublishMsg(ctx, pub)
		cancel()
		if err == nil || publishRefused(err) && !unknown || errors.Is(err, nats.ErrMaxPayload) && !unknown {
			return ack, unknown, err
		}
		if !publishRefused(err) && !errors.Is(err, nats.ErrMaxPayload) {
			if !unknown && e.cfg.StreamWriteError != nil {
				// No PubAck for the first publish: JetStream answers none on a stream whose
				// store failed a write (a full disk), and stores nothing more on it: refused.
				if werr := e.cfg.StreamWriteError(subjects.CallsStream); werr != nil {
					return ack, false, &storeFailedError{err: werr}
				}
			}
			unknown = true
		}
		done := errors.Is(err, nats.ErrConnectionClosed)
		if !done {
			select {
			case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
			case <-e.stopping:
				done = true
			}
		}
		if done || time.Until(deadline) <= 0 {
			if publishRefused(err) {
				return ack, unknown, fmt.Errorf("an earlier publish of the request was not acknowledged; the last was refused: %v", err)
			}
			return ack, unknown, err
		}
	}
}

// storeFailedError is persist's error when the calls stream's store failed a write (see
// Config.StreamWriteError): JetStream stores nothing on it and answers no publish.
type storeFailedError struct{ err error }

func (e *storeFailedError) Error() string {
	return "JetStream's storage is full or failing, it stores nothing more on the stream (" + e.err.Error() + ")"
}

func (e *storeFailedError) Unwrap() error { return e.err }

// resultPoll is how often a waiting front end also looks for the answer on the results stream.
const resultPoll = 2 * time.Second

// resultPrefix is how encodeResult's encoding of the answer of call id begins: such an answer
// is recognized without decoding it (one validity pass instead of a decode of the whole result).
func resultPrefix(id string) []byte {
	qid, _ := json.Marshal(id)
	return fmt.Appendf(make([]byte, 0, len(qid)+16), `{"v":%d,"id":%s,`, subjects.Version, qid)
}

// waitBound is how long a front end waits for a call's answer.
func (e *Executor) waitBound(req subjects.CallRequest) time.Duration {
	call := requestWait(req.TimeoutMs, e.cfg.CallTimeout, e.cfg.MaxCallTimeout)
	approval := requestWait(req.ApprovalTimeoutMs, e.cfg.ApprovalTimeout, e.cfg.MaxApprovalTimeout)
	return call + approval + e.cfg.AckWait + waitSlack
}

// execTenantShare is how many of a front end's maxExecWaiting waiting calls one tenant may hold.
var execTenantShare = maxExecWaiting / 4

// tenantCounts counts what each tenant holds of a shared pool.
type tenantCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more for tenant unless it holds max already.
func (c *tenantCounts) take(tenant string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[tenant] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tenant]++
	return true
}

func (c *tenantCounts) give(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[tenant]--; c.n[tenant] <= 0 {
		delete(c.n, tenant)
	}
}

// auditRefusedEnvelope records a request the front end refuses for its envelope (no valid tenant
// token, too large, not a valid CallRequest), or that the calls stream refused to store (too
// large with its headers, the stream full), as a worker records the same request published on
// the calls stream (see process): the request (its whole message as arguments, capped and
// redacted), the decision with its code, and, when it names an id, the result (the refusal
// sent to the caller, never stored: nothing was). Without a valid tenant token the events go
// under the token no tenant has (subjects.AuditNoTenant). Every request is an audit event,
// whichever way it came.
func (e *Executor) auditRefusedEnvelope(m *nats.Msg, tenant string, req subjects.CallRequest, bad *subjects.Error) {
	c := &call{tenant: tenant, req: req}
	args, n, trunc := e.audit.payload(m.Data)
	msg := e.audit.redact.StringCut(bad.Message, "…")
	reqEv := c.audit(subjects.AuditEvent{Arguments: args, ArgBytes: n, Truncated: trunc})
	decEv := c.audit(subjects.AuditEvent{Decision: bad.Code, Code: bad.Code, Message: msg})
	if tenant == "" {
		reqEv.Message = msg
		e.audit.emitOn(subjects.AuditNoTenant(subjects.AuditRequest), subjects.AuditRequest, reqEv)
		e.audit.emitOn(subjects.AuditNoTenant(subjects.AuditDecision), subjects.AuditDecision, decEv)
		return
	}
	e.audit.emit(subjects.AuditRequest, reqEv)
	e.audit.emit(subjects.AuditDecision, decEv)
	if req.ID != "" {
		e.audit.emit(subjects.AuditResult, c.audit(subjects.AuditEvent{Decision: subjects.CallRefused, Code: bad.Code, Message: msg}))
	}
}
