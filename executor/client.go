package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
)

// Client calls tools through the executor's NATS API. It is what the CLI, the gateway and Code
// Mode use; any NATS client can do the same with the subjects alone.
type Client struct {
	NC *nats.Conn
	// JS is needed by Submit and Await only.
	JS jetstream.JetStream
}

// NewCallID returns a random call id ("c-" and 24 hex digits).
func NewCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// Call sends req to subjects.Exec(tenant) and returns the terminal answer (the worker that ran
// the call sends it to this request's inbox). A request larger than the calls stream accepts is
// answered too_large here without being sent; an empty ID gets a new one. The error is for
// transport failures only (ErrNoExecutor, ctx's deadline): a refusal is a CallResult with Error
// set. When ctx ends first and JS is set, the results stream is read once: an answer whose
// reply was lost is still returned. Give ctx a deadline: the executor persists the call and
// does not answer a caller that stopped waiting.
func (c Client) Call(ctx context.Context, tenant string, req subjects.CallRequest) (subjects.CallResult, error) {
	req, data, res := prepare(tenant, req)
	if res != nil {
		return *res, nil
	}
	m, err := c.NC.RequestWithContext(ctx, subjects.Exec(tenant), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return subjects.CallResult{}, fmt.Errorf("%w on %s", ErrNoExecutor, subjects.Exec(tenant))
	}
	if err != nil && c.JS != nil && ctx.Err() != nil {
		// The answer may be stored with its reply lost (a reconnect): look once more.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if stream, serr := c.JS.Stream(lctx, subjects.ResultsStream); serr == nil {
			if res, ok, gerr := getResult(lctx, stream, tenant, req.ID); gerr == nil && ok {
				return res, nil
			}
		}
	}
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s (id %s): %w", req.Tool, req.ID, err)
	}
	var out subjects.CallResult
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return subjects.CallResult{}, fmt.Errorf("call %s: malformed answer: %w", req.Tool, err)
	}
	return out, nil
}

// prepare fills the request's defaults and encodes it, or answers a request too large to send.
func prepare(tenant string, req subjects.CallRequest) (subjects.CallRequest, []byte, *subjects.CallResult) {
	if req.V == 0 {
		req.V = subjects.Version
	}
	if req.ID == "" {
		req.ID = NewCallID()
	}
	if req.RequestedAt.IsZero() {
		req.RequestedAt = time.Now().UTC()
	}
	data, err := json.Marshal(req)
	if err != nil {
		r := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeBadRequest, Message: "encode request: " + err.Error()})
		return req, nil, &r
	}
	if len(data) > subjects.MaxCallBytes {
		r := refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeTooLarge,
			Message: fmt.Sprintf("call request is %d bytes; the limit is %d", len(data), subjects.MaxCallBytes)})
		return req, nil, &r
	}
	return req, data, nil
}

// Submit persists req on subjects.Calls(tenant) without waiting (Nats-Msg-Id =
// subjects.CallMsgID(tenant, id)) and
// returns the request as sent; duplicate reports that this id was already submitted. Read the
// answer with Await.
func (c Client) Submit(ctx context.Context, tenant string, req subjects.CallRequest) (sent subjects.CallRequest, duplicate bool, err error) {
	req, data, res := prepare(tenant, req)
	if res != nil {
		return req, false, res.Error
	}
	m := &nats.Msg{Subject: subjects.Calls(tenant), Data: data, Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID(tenant, req.ID))
	ack, err := c.JS.PublishMsg(ctx, m)
	if err != nil {
		return req, false, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	return req, ack.Duplicate, nil
}

// Await returns the terminal answer of call id, waiting for it until ctx ends.
func (c Client) Await(ctx context.Context, tenant, id string) (subjects.CallResult, error) {
	ch := make(chan *nats.Msg, 4)
	sub, err := c.NC.ChanSubscribe(subjects.Result(tenant, id), ch)
	if err != nil {
		return subjects.CallResult{}, err
	}
	defer sub.Unsubscribe()
	stream, err := c.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		return subjects.CallResult{}, fmt.Errorf("results stream: %w", err)
	}
	if res, ok, err := getResult(ctx, stream, tenant, id); err != nil {
		return subjects.CallResult{}, err
	} else if ok {
		return res, nil
	}
	for {
		select {
		case m := <-ch:
			var res subjects.CallResult
			if json.Unmarshal(m.Data, &res) == nil && res.ID == id {
				return res, nil
			}
		case <-ctx.Done():
			return subjects.CallResult{}, fmt.Errorf("await %s: %w", id, ctx.Err())
		}
	}
}

// Decide approves or denies a call waiting in needs_approval.
func (c Client) Decide(ctx context.Context, a subjects.Approval) (subjects.ApprovalReply, error) {
	a.V = subjects.Version
	data, err := json.Marshal(a)
	if err != nil {
		return subjects.ApprovalReply{}, err
	}
	tenant := a.Tenant
	if tenant == "" {
		tenant = policy.Local.Tenant
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
