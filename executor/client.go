package executor

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Client errors.
var (
	// ErrNoExecutor is returned when no executor front end answers on the tenant's exec subject.
	ErrNoExecutor = errors.New("no executor is serving")
	// ErrNoWaiter is returned by Decide when no call with that id waits for approval.
	ErrNoWaiter = errors.New("no call is waiting for approval")
	// ErrClientIncomplete is returned (wrapped) by a method called on a Client without what it
	// needs: NC (every method but Submit), JS (CallDirect, Submit and Await).
	ErrClientIncomplete = errors.New("executor: incomplete Client")
)

// need is an error wrapping ErrClientIncomplete when c lacks NC (nc) or JS (js) for method.
func (c Client) need(method string, nc, js bool) error {
	switch {
	case nc && c.NC == nil:
		return fmt.Errorf("%w: %s needs Client.NC", ErrClientIncomplete, method)
	case js && c.JS == nil:
		return fmt.Errorf("%w: %s needs Client.JS", ErrClientIncomplete, method)
	}
	return nil
}

// prepare is prepareWithin the limit of a message of c's connection (its server's
// max_payload, 1 MiB by default): a request over it cannot be sent.
func (c Client) prepare(tenant string, req subjects.CallRequest) (subjects.CallRequest, []byte, *subjects.CallResult) {
	return prepareWithin(tenant, req, c.NC.MaxPayload())
}

// Client calls tools through the executor's NATS API. It is what the CLI, the gateway and Code
// Mode use; any NATS client can do the same with the subjects alone.
//
// A Client is a value: one may be used by any number of goroutines at once. Its methods
// return an error wrapping ErrClientIncomplete when a field they need is nil.
type Client struct {
	// NC is needed by every method but Submit.
	NC *nats.Conn
	// JS is needed by CallDirect, Submit and Await; Call uses it, when set, to find an answer
	// whose reply was lost and to publish again on the calls stream a request nobody answered
	// (see Call). Make it with jetstream.WithPublishAsyncTimeout, so that nats.go forgets the
	// async publishes whose PubAck was lost (it keeps them pending otherwise).
	JS jetstream.JetStream
	// PubAckWait bounds CallDirect's wait for the calls stream's PubAck of its request (0 →
	// DefaultPubAckWait): past it the request's outcome is unknown (a publish lost on its way
	// to a stream leader that died), and it is published again under the same id, as after a
	// lost connection. It does not depend on JS's own async publish timeout, which is off
	// unless JS was made with jetstream.WithPublishAsyncTimeout. With JS, it is also how long
	// Call waits for an answer before it publishes its request on the calls stream itself (a
	// request to the front end lost on its way), and then for that publish's PubAck.
	PubAckWait time.Duration
}

// DefaultPubAckWait is Client.PubAckWait's default.
const DefaultPubAckWait = 5 * time.Second

// NewCallID returns a random call id ("c-" and 24 hex digits).
func NewCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// Call sends req to subjects.Exec(tenant) and returns the terminal answer (the worker that ran
// the call sends it to this request's inbox). A request larger than the calls stream accepts is
// answered too_large here without being sent (so is one larger than a message of NC may be: its
// server's max_payload); an empty ID gets a new one, and the bytes of an ID
// that are not UTF-8 are sent as U+FFFD (as JSON carries them: the executor answers that id;
// CallDirect and Submit do the same); an ID over 256 bytes as sent is answered bad_request
// without being sent (CallDirect and Submit too). The error is for
// transport failures only (ErrNoExecutor, ctx's deadline): a refusal is a CallResult with Error
// set. Give ctx a deadline: the executor persists the call and does not answer a caller that
// stopped waiting. A ctx that already ended sends nothing (its error is returned), as with
// CallDirect and Submit.
//
// With JS, Call also reads the results stream every 2 s while waiting, and once more when ctx
// ends first: an answer whose reply was lost (a reconnect) is still returned. And the request to
// the front end is a core NATS message, which can be lost on its way (a cluster node dying with
// it in its buffers): nothing is stored then and nobody answers. So a Call that has neither an
// answer nor a stored result within PubAckWait publishes the same request straight on
// subjects.Calls(tenant), as CallDirect does (the same Nats-Msg-Id, Mcpstream-Reply-To its
// inbox): stored once, it runs once. A PubAck (a Duplicate one too: the request is stored)
// ends the resends; none, and it is published again after twice the wait (at most
// maxResendWait). An answer obtained after such a resend is marked Duplicate only when the
// resend's PubAck said Duplicate with no earlier resend lost (else the duplicate may be this
// call's own resend), and a front end's answer that is not the call's — a refusal that says it
// stored nothing (unavailable, rate_limited), a timeout (no PubAck, no answer within its bound,
// the front end stopping) — is not taken then unless the results stream holds it (the
// worker's answer, stored before it is sent) or cannot be read: the resend may be stored, and
// its answer comes. ErrNoExecutor is returned only before any resend. Without JS there is no
// resend: a lost request waits for ctx's deadline.
func (c Client) Call(ctx context.Context, tenant string, req subjects.CallRequest) (subjects.CallResult, error) {
	if err := c.need("Call", true, false); err != nil {
		return subjects.CallResult{}, err
	}
	if e := tenantRefusal(tenant, subjects.Exec); e != nil {
		return refusal(tenant, req, subjects.CallRefused, e), nil
	}
	req, data, res := c.prepare(tenant, req)
	if res != nil {
		return *res, nil
	}
	if err := ctx.Err(); err != nil {
		// (As nats.go's request/reply: a context already ended sends nothing. Sent, the
		// request would be stored and run, its caller told it was given up.)
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
	}
	if c.JS != nil {
		return c.callResending(ctx, tenant, req, data)
	}
	m, err := c.NC.RequestWithContext(ctx, subjects.Exec(tenant), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return subjects.CallResult{}, fmt.Errorf("%w on %s", ErrNoExecutor, subjects.Exec(tenant))
	}
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
	}
	out, err := decodeResult(m.Data)
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s: malformed answer: %w", req.Tool, err)
	}
	return out, nil
}

// maxResendWait bounds the backoff of Call's resends of a request nobody answered.
const maxResendWait = 30 * time.Second

// callResending is Call with JS: the request goes to the front end on an inbox of the
// connection's answer mux, which every resend (straight on the calls stream) shares.
func (c Client) callResending(ctx context.Context, tenant string, req subjects.CallRequest, data []byte) (subjects.CallResult, error) {
	inbox, answers, done, err := answerMuxFor(c.NC).wait()
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): subscribe to the answer: %w", req.Tool, req.ID, err)
	}
	defer done()
	if err := c.NC.PublishRequest(subjects.Exec(tenant), inbox, data); err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
	}
	m := &nats.Msg{Subject: subjects.Calls(tenant), Data: data, Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID(tenant, req.ID))
	m.Header.Set(subjects.HeaderReplyTo, inbox)
	wait := c.PubAckWait
	if wait <= 0 {
		wait = DefaultPubAckWait
	}
	// The worker sends the answer to the inbox once: one sent while this connection was away
	// (a NATS restart under a call waiting for approval, say) is lost to the inbox. The results
	// stream keeps it: it is read every resultPoll, as CallDirect does. Each read (up to
	// resultReadWait: every one, for a NATS user without the JetStream API) and the check of a
	// duplicate PubAck run on a goroutine of their own, ended with the call: an answer that
	// comes meanwhile is taken at once.
	poll := time.NewTicker(resultPoll)
	defer poll.Stop()
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	type found struct {
		res subjects.CallResult
		ok  bool
	}
	polled, reading := make(chan found, 1), false
	takenc := make(chan bool, 1)
	resend := time.NewTimer(wait)
	defer resend.Stop()
	var okc <-chan *jetstream.PubAck
	var errc <-chan error
	sentAgain := false // published on the calls stream: a duplicate may be this call's own request
	// othersStored: a resend's PubAck said Duplicate, and no earlier resend may be stored (none
	// went without a PubAck or a refusal): no resend of this call stored the request, so what
	// the front end says of a duplicate holds (it knows whether the stored request is its own
	// publish of this request). Otherwise a duplicate after a resend may be of this call's own
	// resend, stored before the front end's publish.
	othersStored, lostResend := false, false
	mine := func(res subjects.CallResult) subjects.CallResult {
		if sentAgain && !othersStored {
			res.Duplicate = false
		}
		return res
	}
	// take is what answer am to the inbox means: the call's result (or error) and done, or not
	// done (a message to pass over).
	take := func(am *nats.Msg) (subjects.CallResult, error, bool) {
		if len(am.Data) == 0 && am.Header.Get("Status") == "503" {
			// No front end took the request. (After a resend, the stored request waits for
			// an executor: it is no longer the caller's to send elsewhere.)
			if !sentAgain {
				return subjects.CallResult{}, fmt.Errorf("%w on %s", ErrNoExecutor, subjects.Exec(tenant)), true
			}
			return subjects.CallResult{}, nil, false
		}
		out, err := decodeResult(am.Data)
		if err != nil {
			if !sentAgain {
				return subjects.CallResult{}, fmt.Errorf("call %s: malformed answer: %w", req.Tool, err), true
			}
			return subjects.CallResult{}, nil, false
		}
		if out.ID != "" && out.ID != req.ID {
			return subjects.CallResult{}, nil, false // junk: not this call's answer
		}
		if sentAgain && frontEndMaybe(out) {
			// The front end's refusal says it stored nothing of its request (or did not
			// take it), and its timeout that it got no PubAck, gave up waiting or stopped,
			// but the resend (published until a PubAck) may be stored and run: its answer
			// comes to the inbox and the results stream. The worker's own answer with these
			// codes is the call's, stored before it is sent: it is there. (Unread — a NATS
			// user without the JetStream API — the answer is taken, as before any resend:
			// passed over, the worker's would be lost, and the call wait until its deadline.)
			res, ok, err := c.readStored(ctx, tenant, req.ID)
			switch {
			case err == nil && ok:
				return mine(res), nil, true
			case err == nil:
				return subjects.CallResult{}, nil, false
			}
		}
		return mine(out), nil, true
	}
	for {
		select {
		case am := <-answers:
			if res, err, done := take(am); done {
				return res, err
			}
		case ack := <-okc:
			okc, errc = nil, nil
			resend.Stop() // stored: no more resends, the answer comes
			othersStored = ack.Duplicate && !lostResend
			if ack.Duplicate {
				// (Bounded as CallDirect's check is: unread, the id is taken for this call's own.)
				seq := ack.Sequence
				go func() {
					ictx, icancel := context.WithTimeout(bctx, 2*resultReadWait)
					defer icancel()
					takenc <- idTaken(ictx, c.JS, tenant, req.ID, seq)
				}()
			}
		case taken := <-takenc:
			if taken {
				return idTakenRefusal(tenant, req), nil
			}
		case err := <-errc:
			// No PubAck (refused, the connection dropped, a timeout): nothing known to be
			// stored; the resend timer publishes again.
			okc, errc = nil, nil
			lostResend = lostResend || !publishRefused(err)
		case <-resend.C:
			// Neither an answer nor a PubAck within the wait: the request (or the last resend)
			// may be lost. (A late PubAck of an earlier publish is not read: this one's is.)
			lostResend = lostResend || okc != nil
			okc, errc = nil, nil
			if fut, err := c.JS.PublishMsgAsync(m); err == nil {
				okc, errc, sentAgain = fut.Ok(), fut.Err(), true
			}
			wait = min(2*wait, maxResendWait)
			resend.Reset(wait)
		case <-poll.C:
			if c.NC.IsClosed() {
				// (As a request/reply ends when its connection is closed: no answer can come,
				// and the results stream cannot be read. One that came before it closed, or a
				// read that found it, is the answer: select picks among ready cases at random.)
				for am := range arrived(answers) {
					if res, err, done := take(am); done {
						return res, err
					}
				}
				select {
				case f := <-polled:
					if f.ok {
						return mine(f.res), nil
					}
				default:
				}
				return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, nats.ErrConnectionClosed)
			}
			if !reading {
				reading = true
				go func() {
					res, ok := c.stored(bctx, tenant, req.ID)
					polled <- found{res, ok}
				}()
			}
		case f := <-polled:
			reading = false
			if f.ok {
				return mine(f.res), nil
			}
		case <-ctx.Done():
			// The answer may be stored with its reply lost (a reconnect): look once more.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			res, ok := c.stored(lctx, tenant, req.ID)
			cancel()
			if ok {
				return mine(res), nil
			}
			return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, ctx.Err())
		}
	}
}

// frontEndMaybe reports whether answer res may be the front end's own rather than the call's:
// a refusal unavailable or rate_limited (the request not stored, or not taken), or a failure
// timeout (no PubAck for the request, no answer within its bound, the front end stopping).
func frontEndMaybe(res subjects.CallResult) bool {
	if res.Error == nil {
		return false
	}
	switch code := res.Error.Code; res.Status {
	case subjects.CallRefused:
		return code == subjects.CodeUnavailable || code == subjects.CodeRateLimited
	case subjects.CallFailed:
		return code == subjects.CodeTimeout
	}
	return false
}

// CallDirect is Call without the front end, for callers with a JetStream context (JS): the
// request is persisted straight on subjects.Calls(tenant) (Nats-Msg-Id subjects.CallMsgID) with
// Mcpstream-Reply-To set to a new inbox, which the worker answers once the answer is stored.
// That saves the front end's hop and its decoding of the request. A resent id gets the stored
// answer of the first (Duplicate set); a request JetStream refuses is refused unavailable, and
// one whose PubAck never came (a NATS restart under it, or none within PubAckWait: a publish lost
// with its stream leader) is published again under the same id at the next 2 s poll, and so
// again after each publish that gets no PubAck (an error, or none within PubAckWait), until
// one is acknowledged or the call answered (it may be stored: it is never refused, also when
// JetStream refuses a later publish). The results stream is also read every 2 s, so an inbox the executors do not
// answer (outside their Config.ReplyPrefixes) delays the answer but never loses it. Unlike
// Call, a call made while no executor runs waits (it is persisted and runs when one starts):
// give ctx a deadline.
func (c Client) CallDirect(ctx context.Context, tenant string, req subjects.CallRequest) (subjects.CallResult, error) {
	if err := c.need("CallDirect", true, true); err != nil {
		return subjects.CallResult{}, err
	}
	if e := tenantRefusal(tenant, subjects.Calls); e != nil {
		return refusal(tenant, req, subjects.CallRefused, e), nil
	}
	req, data, res := c.prepare(tenant, req)
	if res != nil {
		return *res, nil
	}
	if err := ctx.Err(); err != nil {
		// (Sent, it would be stored and run, its caller told it was given up.)
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
	}
	inbox, answers, done, err := answerMuxFor(c.NC).wait()
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): subscribe to the answer: %w", req.Tool, req.ID, err)
	}
	defer done()
	m := &nats.Msg{Subject: subjects.Calls(tenant), Data: data, Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID(tenant, req.ID))
	m.Header.Set(subjects.HeaderReplyTo, inbox)
	notStored := func(err error) subjects.CallResult {
		return refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: notPersistedCode(err),
			Message: notPersistedMessage(err)})
	}
	fut, err := c.JS.PublishMsgAsync(m)
	if err != nil {
		return notStored(err), nil
	}
	poll := time.NewTicker(resultPoll)
	defer poll.Stop()
	ackWait := c.PubAckWait
	if ackWait <= 0 {
		ackWait = DefaultPubAckWait
	}
	// No PubAck within ackWait: the publish may be lost (its stream leader died with it), and
	// nats.go says nothing unless JS has an async publish timeout.
	ackTimer := time.NewTimer(ackWait)
	defer ackTimer.Stop()
	okc, errc := fut.Ok(), fut.Err()
	republish := false // the publish's outcome is unknown: publish again at the next poll
	sentAgain := false // published again: a duplicate may be this call's own first publish
	for {
		select {
		case am := <-answers:
			if out, err := decodeResult(am.Data); err == nil && out.ID == req.ID {
				return out, nil
			}
		case ack := <-okc:
			okc, errc = nil, nil
			if ack.Duplicate {
				// (Bounded as the results reads are: a read lost with its stream leader does
				// not hold the call until its deadline; unread, the id is taken for this
				// call's own.)
				ictx, icancel := context.WithTimeout(ctx, 2*resultReadWait)
				taken := idTaken(ictx, c.JS, tenant, req.ID, ack.Sequence)
				icancel()
				if taken {
					return idTakenRefusal(tenant, req), nil
				}
				// A resend: the first request's worker answers the first caller. (Or, published
				// again after a lost PubAck, this call's own first publish: no resend of the
				// caller's, the answer is its own.)
				res, err := c.Await(ctx, tenant, req.ID)
				if err != nil {
					return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
				}
				res.Duplicate = !sentAgain
				return res, nil
			}
		case err := <-errc:
			okc, errc = nil, nil
			if publishRefused(err) && !sentAgain {
				return notStored(err), nil
			}
			// (A republish refused — "no responders" from a node whose JetStream is not up
			// yet, say — stored nothing, but the first publish may be stored and run: the
			// outcome stays unknown, and it is published again.)
			// No PubAck (the connection dropped under it, or the publish timed out): the
			// request may be stored all the same, and then it runs. A refusal would tell the
			// caller that nothing ran. It is published again (the same Nats-Msg-Id: dropped as a
			// duplicate if it was stored) while its answer is awaited.
			republish = true
		case <-ackTimer.C:
			if okc != nil {
				// (The late PubAck of this publish, if it comes, is not read: the republish's is.)
				okc, errc, republish = nil, nil, true
			}
		case <-poll.C:
			if c.NC.IsClosed() {
				// (As Call ends: no answer can come, and the results stream cannot be read. One
				// that came before it closed is the answer.)
				for am := range arrived(answers) {
					if out, err := decodeResult(am.Data); err == nil && out.ID == req.ID {
						return out, nil
					}
				}
				return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, nats.ErrConnectionClosed)
			}
			if res, ok := c.stored(ctx, tenant, req.ID); ok {
				return res, nil
			}
			if republish {
				if fut, err := c.JS.PublishMsgAsync(m); err == nil {
					okc, errc, republish, sentAgain = fut.Ok(), fut.Err(), false, true
					ackTimer.Reset(ackWait)
				}
			}
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			res, ok := c.stored(lctx, tenant, req.ID)
			cancel()
			if ok {
				return res, nil
			}
			return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, ctx.Err())
		}
	}
}

// publishRefused reports whether err, the outcome of a JetStream publish, says that the message
// was not stored: JetStream refused it (an API error), or no stream answered. Any other error (a
// connection lost before the PubAck came, a publish timeout) leaves the outcome unknown.
func publishRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// resultReadWait bounds each read of the results stream while a client waits for an answer
// (one poll's worth). A JetStream API request that reaches a stream leader as it dies (a
// cluster node shut down) is never answered, and nobody says "no responders": made with the
// caller's context, such a read held the wait until the caller's deadline — CallDirect's
// loop did not even take the answer that came to its inbox meanwhile. Bounded, a lost read
// costs one poll, and the next one asks the new leader.
const resultReadWait = resultPoll

// stored is the answer of call id stored on the results stream, if it is there (and the stream
// could be read within resultReadWait).
func (c Client) stored(ctx context.Context, tenant, id string) (subjects.CallResult, bool) {
	res, ok, err := c.readStored(ctx, tenant, id)
	return res, err == nil && ok
}

// readStored reads the answer of call id from the results stream, within resultReadWait.
func (c Client) readStored(ctx context.Context, tenant, id string) (subjects.CallResult, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, resultReadWait)
	defer cancel()
	stream, err := c.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		return subjects.CallResult{}, false, fmt.Errorf("results stream: %w", err)
	}
	return getResult(ctx, stream, tenant, id)
}

// notPersistedCode is the code of a call request the calls stream did not store: too_large when
// it is larger than a message may be — the connection's max_payload, or the stream's
// max_msg_size (MaxCallBytes), which JetStream counts with the headers (Nats-Msg-Id,
// Mcpstream-Reply-To), so a request a few bytes under MaxCallBytes passes prepare's check and is
// still refused — else unavailable (retrying may work).
func notPersistedCode(err error) string {
	var apiErr *jetstream.APIError
	if errors.Is(err, nats.ErrMaxPayload) || strings.Contains(err.Error(), "maximum message size") ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum) {
		return subjects.CodeTooLarge
	}
	return subjects.CodeUnavailable
}

// notPersistedMessage says why the calls stream did not store a request, naming the stream: a
// bound reached (NATS's "maximum messages exceeded") or a JetStream out of storage.
func notPersistedMessage(err error) string {
	if subjects.OutOfStorage(err) {
		return "the call could not be stored on the calls stream " + subjects.CallsStream + ": JetStream's storage is full (" + err.Error() + ")"
	}
	return "the call could not be stored on the calls stream " + subjects.CallsStream + ": " + err.Error()
}

// prepare fills the request's defaults and encodes it, or answers a request too large to send.
func prepare(tenant string, req subjects.CallRequest) (subjects.CallRequest, []byte, *subjects.CallResult) {
	return prepareWithin(tenant, req, 0)
}

// prepareWithin is prepare with maxPayload, the max_payload of the connection the request is
// sent on (0: unknown), as a limit too: a request over the smaller of it and MaxCallBytes is
// refused naming that one (the limit that binds: a caller told 4 MiB would be refused again
// under it).
func prepareWithin(tenant string, req subjects.CallRequest, maxPayload int64) (subjects.CallRequest, []byte, *subjects.CallResult) {
	if req.V == 0 {
		req.V = subjects.Version
	}
	if req.ID == "" {
		req.ID = NewCallID()
	}
	// The id the executor reads, answers and de-duplicates: one whose bytes are not UTF-8
	// would be looked for where its answer never is.
	req.ID = wireID(req.ID)
	if e := longIDError(req.ID); e != nil {
		// No id to answer to: the executor refuses it on the request's reply inbox alone,
		// with no id (CallDirect would pass that over as another call's), and stores no
		// answer (Await would wait for nothing). Refused here as the executor would.
		r := refusal(tenant, subjects.CallRequest{Tool: req.Tool}, subjects.CallRefused, e)
		return req, nil, &r
	}
	if req.RequestedAt.IsZero() {
		req.RequestedAt = time.Now().UTC()
	}
	data, err := json.Marshal(req)
	if err != nil {
		r := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeBadRequest, Message: "encode request: " + err.Error()})
		return req, nil, &r
	}
	if maxPayload > 0 && maxPayload < subjects.MaxCallBytes && int64(len(data)) > maxPayload {
		r := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeTooLarge,
			Message: fmt.Sprintf("call request is %d bytes; the NATS connection's max_payload is %d", len(data), maxPayload)})
		return req, nil, &r
	}
	if len(data) > subjects.MaxCallBytes {
		r := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeTooLarge,
			Message: fmt.Sprintf("call request is %d bytes; the limit is %d", len(data), subjects.MaxCallBytes)})
		return req, nil, &r
	}
	return req, data, nil
}

// tenantRefusal is the refusal of a tenant that no executor serves (subjects.CheckTenant: one
// over subjects.MaxUserBytes, or the empty one), worded as the executor words it for the
// subject subjectOf builds (the one the request would be sent on); nil for a tenant it serves.
// Such a tenant is refused before anything is sent: each byte of a long one that is not a
// letter, digit, '_' or '-' takes three in a subject, and a subject past the server's
// max_control_line gets the connection closed, every request in flight on it cut; a call
// stored under the empty one is refused by the workers with no answer stored, and Await would
// wait for it until its context ended.
func tenantRefusal(tenant string, subjectOf func(string) string) *subjects.Error {
	if subjects.CheckTenant(tenant) == nil {
		return nil
	}
	return subjects.TenantRefusal(subjectOf(tenant))
}

// longIDError is the refusal of id (as sent: see wireID) when it is over the executor's
// maxCallID bytes, nil for an id within: no call has such an id (the executor refuses it, and
// every client path before sending), and one long enough puts a subject of it past the
// server's max_control_line, which closes the connection that sent it.
func longIDError(id string) *subjects.Error {
	if len(id) <= maxCallID {
		return nil
	}
	return &subjects.Error{Code: subjects.CodeBadRequest,
		Message: fmt.Sprintf("id is %d bytes long; at most %d (%q)", len(id), maxCallID, truncateString(id, 20))}
}

// wireID is id as a JSON string carries it, and so as the executor reads it: each byte that is
// not UTF-8 is U+FFFD (encoding/json). Its answer, results subject and de-duplication key are
// that id's.
func wireID(id string) string {
	if utf8.ValidString(id) {
		return id
	}
	var b strings.Builder
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(id[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Submit persists req on subjects.Calls(tenant) without waiting (Nats-Msg-Id =
// subjects.CallMsgID(tenant, id)) and
// returns the request as sent; duplicate reports that this id was already submitted. Read the
// answer with Await. An ID over 256 bytes as sent is a *subjects.Error with Code bad_request,
// and nothing is stored. An id whose de-duplication key a message of another tenant holds is
// ErrCallIDTaken. A request too large to be stored — over MaxCallBytes, over the max_payload
// of JS's connection, or refused by the calls stream's maximum message size (which counts the
// headers) — is a *subjects.Error with Code too_large, whichever limit binds (its message
// names that one), and nothing was stored. An error without a PubAck (a timeout, a dropped
// connection) does not say that nothing was stored: Submit again with the same id (sent.ID) —
// never a new one — and a stored request is not stored twice.
func (c Client) Submit(ctx context.Context, tenant string, req subjects.CallRequest) (sent subjects.CallRequest, duplicate bool, err error) {
	if err := c.need("Submit", false, true); err != nil {
		return req, false, err
	}
	if e := tenantRefusal(tenant, subjects.Calls); e != nil {
		return req, false, e
	}
	var maxPayload int64
	if nc := c.JS.Conn(); nc != nil {
		maxPayload = nc.MaxPayload()
	}
	req, data, res := prepareWithin(tenant, req, maxPayload)
	if res != nil {
		return req, false, res.Error
	}
	m := &nats.Msg{Subject: subjects.Calls(tenant), Data: data, Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID(tenant, req.ID))
	ack, err := c.JS.PublishMsg(ctx, m)
	if err != nil {
		if publishRefused(err) || errors.Is(err, nats.ErrMaxPayload) {
			if notPersistedCode(err) == subjects.CodeTooLarge {
				// (As prepare's refusal: the same error whichever limit binds.)
				return req, false, &subjects.Error{Code: subjects.CodeTooLarge, Message: notPersistedMessage(err)}
			}
		}
		return req, false, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	if ack.Duplicate && idTaken(ctx, c.JS, tenant, req.ID, ack.Sequence) {
		return req, false, fmt.Errorf("submit %s: %w", req.ID, ErrCallIDTaken)
	}
	return req, ack.Duplicate, nil
}

// Await returns the terminal answer of call id, waiting for it until ctx ends: it arrives on
// the results subject, which Await subscribes to, and the results stream is read every 2 s
// too (an answer the subscription missed is still returned). An id that is not UTF-8 is the
// call sent with it (its invalid bytes U+FFFD, as Submit sends it). An id over 256 bytes as
// sent, which no call has, is answered refused / bad_request at once, as Call answers it. An id
// never sent waits until ctx ends: give ctx a deadline. So does a results stream that does not exist yet (an
// integrator started before the executor or `mcpstream up` declared the streams, or the stream
// being recreated): it is read again every 2 s, and the answer returned once it is there; any
// other error of the first read is returned at once. A connection (NC) closed under it ends it
// with nats.ErrConnectionClosed, as it ends Call and CallDirect — unless the answer had
// already arrived: Await, Call and CallDirect return an answer that came before the
// connection closed.
func (c Client) Await(ctx context.Context, tenant, id string) (subjects.CallResult, error) {
	if err := c.need("Await", true, true); err != nil {
		return subjects.CallResult{}, err
	}
	id = wireID(id)
	if e := cmp.Or(tenantRefusal(tenant, func(t string) string { return subjects.Result(t, id) }), longIDError(id)); e != nil {
		// No call has it: Await would wait for nothing until ctx ends (and a results subject
		// past the server's max_control_line would get NC closed). Refused as Call refuses it.
		return refusal(tenant, subjects.CallRequest{}, subjects.CallRefused, e), nil
	}
	ch := make(chan *nats.Msg, 4)
	sub, err := c.NC.ChanSubscribe(subjects.Result(tenant, id), ch)
	if err != nil {
		return subjects.CallResult{}, err
	}
	defer sub.Unsubscribe()
	// answered is the answer that already came to the subscription, if any: one that came
	// before the connection closed (or before a read failed) is the answer, never the error.
	answered := func() (subjects.CallResult, bool) {
		for m := range arrived(ch) {
			var res subjects.CallResult
			if json.Unmarshal(m.Data, &res) == nil && res.ID == id {
				return res, true
			}
		}
		return subjects.CallResult{}, false
	}
	if res, ok, err := c.readStored(ctx, tenant, id); err != nil && !awaitable(err) {
		if res, ok := answered(); ok {
			return res, nil
		}
		if c.NC.IsClosed() {
			return subjects.CallResult{}, fmt.Errorf("await %s: %w", id, nats.ErrConnectionClosed)
		}
		return subjects.CallResult{}, fmt.Errorf("await %s: %w", id, err)
	} else if ok {
		return res, nil
	}
	// (A read that got no answer within resultReadWait — lost with a stream leader that died
	// under it — is not the caller's error: the polls below read again. Nor is a results
	// stream not declared yet: the answer can only come once it is, and it is read again.)
	// The subscription holds a few messages: a burst on the subject past them (junk, the
	// refused answers of resends) is dropped by the NATS client (slow consumer), and the
	// answer may be dropped with it, or come while the connection is away. The results stream
	// keeps it: it is read every resultPoll too, as Call and CallDirect do.
	poll := time.NewTicker(resultPoll)
	defer poll.Stop()
	for {
		select {
		case m := <-ch:
			var res subjects.CallResult
			if json.Unmarshal(m.Data, &res) == nil && res.ID == id {
				return res, nil
			}
		case <-poll.C:
			if c.NC.IsClosed() {
				if res, ok := answered(); ok {
					return res, nil
				}
				return subjects.CallResult{}, fmt.Errorf("await %s: %w", id, nats.ErrConnectionClosed)
			}
			if res, ok := c.stored(ctx, tenant, id); ok {
				return res, nil
			}
		case <-ctx.Done():
			if res, ok := answered(); ok {
				return res, nil
			}
			return subjects.CallResult{}, fmt.Errorf("await %s: %w", id, ctx.Err())
		}
	}
}

// awaitable reports whether err, of Await's first read of the results stream, leaves the
// answer to wait for: a read that got no answer in time, or a results stream that does not
// exist yet (an integrator started before the executor, or mcpstream up, declared the streams;
// a stream being recreated). Await then reads it again at each poll.
func awaitable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// arrived yields the messages already waiting in ch, without waiting for more: what a select
// that also found the connection closed (both ready: it picks at random) must not pass over.
func arrived(ch <-chan *nats.Msg) iter.Seq[*nats.Msg] {
	return func(yield func(*nats.Msg) bool) {
		for range cap(ch) {
			select {
			case m := <-ch:
				if m == nil || !yield(m) {
					return
				}
			default:
				return
			}
		}
	}
}

// Decide approves or denies a call waiting in needs_approval. An ID that is not UTF-8 is the
// call sent with it (its invalid bytes U+FFFD), as for Await; one over 256 bytes as sent, which
// no call has, is answered with an ApprovalReply whose Error is bad_request, unsent.
func (c Client) Decide(ctx context.Context, a subjects.Approval) (subjects.ApprovalReply, error) {
	if err := c.need("Decide", true, false); err != nil {
		return subjects.ApprovalReply{}, err
	}
	a.V = subjects.Version
	// The id the call waits under: as Call and Submit send it (each byte that is not UTF-8
	// U+FFFD), its approvals subject built from that.
	a.ID = wireID(a.ID)
	if e := longIDError(a.ID); e != nil {
		// No call waits under it; and an approvals subject past the server's
		// max_control_line would get NC closed. Refused unsent, as Call refuses it.
		return subjects.ApprovalReply{V: subjects.Version, Error: e}, nil
	}
	data, err := json.Marshal(a)
	if err != nil {
		return subjects.ApprovalReply{}, err
	}
	tenant := a.Tenant
	if tenant == "" {
		tenant = policy.Local.Tenant
	}
	if e := subjects.CheckTenant(tenant); e != nil {
		// As a long id: no call waits under it, and its approvals subject could get NC closed.
		return subjects.ApprovalReply{V: subjects.Version, Error: e}, nil
	}
	m, err := c.NC.RequestWithContext(ctx, subjects.Approvals(tenant, a.ID), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return subjects.ApprovalReply{}, fmt.Errorf("%w: %s", ErrNoWaiter, a.ID)
	}
	if err != nil {
		return subjects.ApprovalReply{}, fmt.Errorf("approval of %s: %w", a.ID, err)
	}
	var rep subjects.ApprovalReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return subjects.ApprovalReply{}, fmt.Errorf("approval of %s: malformed answer: %w", a.ID, err)
	}
	return rep, nil
}

// answerMux routes the answers of CallDirect and Call (with JS) on one connection: one wildcard subscription
// (<inbox>.*) for every call, like nats.go's request/reply, rather than a subscription per call
// (each one a SUB and an UNSUB the server must process).
type answerMux struct {
	nc      *nats.Conn
	mu      sync.Mutex
	prefix  string // "<inbox>."
	sub     *nats.Subscription
	next    uint64
	waiting map[string]chan *nats.Msg
}

// answerMuxes holds the mux of each connection (*nats.Conn → *answerMux). The muxes of closed
// connections are removed when another connection gets its mux (see answerMuxFor).
var answerMuxes sync.Map

func answerMuxFor(nc *nats.Conn) *answerMux {
	if m, ok := answerMuxes.Load(nc); ok {
		return m.(*answerMux)
	}
	m, loaded := answerMuxes.LoadOrStore(nc, &answerMux{nc: nc, waiting: map[string]chan *nats.Msg{}})
	if !loaded {
		// A closed connection's mux would keep it, its subscription and buffers, reachable for
		// good: a process that opens connections as it goes would grow without bound. Each new
		// one sweeps them (the map holds a mux per connection in use, so this stays cheap).
		answerMuxes.Range(func(k, _ any) bool {
			if c := k.(*nats.Conn); c != nc && c.IsClosed() {
				answerMuxes.Delete(c)
			}
			return true
		})
	}
	return m.(*answerMux)
}

// wait returns a new reply subject, the channel its messages arrive on, and the function that
// forgets it.
func (m *answerMux) wait() (string, <-chan *nats.Msg, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sub == nil || !m.sub.IsValid() {
		m.prefix = m.nc.NewInbox() + "."
		sub, err := m.nc.Subscribe(m.prefix+"*", m.route)
		if err != nil {
			if m.nc.IsClosed() {
				answerMuxes.Delete(m.nc)
			}
			return "", nil, nil, err
		}
		sub.SetPendingLimits(-1, -1)
		m.sub = sub
	}
	m.next++
	token := strconv.FormatUint(m.next, 36)
	ch := make(chan *nats.Msg, 4)
	m.waiting[token] = ch
	return m.prefix + token, ch, func() {
		m.mu.Lock()
		delete(m.waiting, token)
		m.mu.Unlock()
	}, nil
}

// route hands a message to the call waiting on its subject; others are dropped.
func (m *answerMux) route(msg *nats.Msg) {
	m.mu.Lock()
	ch := m.waiting[strings.TrimPrefix(msg.Subject, m.prefix)]
	m.mu.Unlock()
	if ch != nil {
		select {
		case ch <- msg:
		default: // junk sent to the subject: the answer has room to come
		}
	}
}
