package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// Dispatcher runs tools/call on the session a connector holds for server. The reply's Error.Code
// tells whether the request reached the server: unavailable means it was not sent (safe to
// retry or refuse), and so does too_large (a request NATS cannot carry); protocol_error, timeout
// and outcome_unknown mean it may have run.
// In-process it is the registrysync manager; across processes NATSDispatcher.
type Dispatcher interface {
	Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply
}

// Relister asks the connector of server to re-list now and answers once the new snapshot, if
// any, is published.
type Relister interface {
	Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply
}

// NATSDispatcher dispatches over NATS request/reply on subjects.Dispatch(server).
type NATSDispatcher struct {
	NC *nats.Conn
	// Grace is added to the call's timeout for the NATS request, also past the deadline of
	// the context Dispatch is given: the connector's answer is awaited that long; 0 → 2s.
	Grace time.Duration
}

// Dispatch implements Dispatcher.
func (d NATSDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	// Not json.Marshal: it would escape every <, > and & of the arguments as six bytes, and
	// HTML arguments well within a call's 4 MiB would no longer fit in a NATS message.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return dispatchErr(subjects.CodeInternal, "encode dispatch request: "+err.Error())
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	grace := d.Grace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	if req.TimeoutMs > 0 {
		// The connector's answer comes after the caller's deadline: it times the call out on
		// its own clock, started when the request reached it, and its answer (a result that
		// came at the last moment, or its own timeout) still has to cross NATS. The caller's
		// deadline (the executor's is the call's timeout) does not end the wait, only the
		// grace past it does; a cancellation of the caller's context still does.
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(parent), time.Duration(req.TimeoutMs)*time.Millisecond+grace)
		defer cancel()
		stop := context.AfterFunc(parent, func() {
			if !errors.Is(parent.Err(), context.DeadlineExceeded) {
				cancel()
			}
		})
		defer stop()
	}
	msg, err := d.NC.RequestWithContext(ctx, subjects.Dispatch(server), data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return notSentErr(subjects.CodeUnavailable, "no connector serves server "+server+"; nothing was sent")
	case errors.Is(err, nats.ErrMaxPayload):
		// Refused by the client before publishing: nothing was sent.
		return notSentErr(subjects.CodeTooLarge, fmt.Sprintf("the dispatch request is %d bytes, more than a NATS message holds; nothing was sent", len(data)))
	case err != nil && ctx.Err() != nil:
		// The connector may have run the call: its answer did not come.
		return dispatchErr(subjects.CodeOutcomeUnknown, "no answer from the connector of "+server+": "+err.Error())
	case err != nil:
		return dispatchErr(subjects.CodeOutcomeUnknown, "dispatch to "+server+": "+err.Error())
	}
	var rep subjects.DispatchReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return dispatchErr(subjects.CodeOutcomeUnknown, "malformed dispatch reply from "+server+": "+err.Error())
	}
	if rep.Error == nil && len(rep.Result) == 0 {
		return dispatchErr(subjects.CodeOutcomeUnknown, "empty dispatch reply from "+server)
	}
	return rep
}

// NATSRelister re-lists over NATS request/reply on subjects.Relist(server).
type NATSRelister struct{ NC *nats.Conn }

// Relist implements Relister.
func (r NATSRelister) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	data, err := json.Marshal(req)
	if err != nil {
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeInternal, Message: err.Error()}}
	}
	msg, err := r.NC.RequestWithContext(ctx, subjects.Relist(server), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "no connector serves server " + server}}
	}
	if err != nil {
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: fmt.Sprintf("re-list %s: %v", server, err)}}
	}
	var rep subjects.RelistReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeUnavailable, Message: "malformed re-list reply from " + server}}
	}
	return rep
}

// maxDispatchErrorBytes caps the message and the reason of a dispatch error that a call's result
// and audit events carry: they may hold a server's own words (registrysync cuts a JSON-RPC
// error's to 1 KiB, but a Dispatcher may be anything on NATS), and a hostile server's words
// may be megabytes.
const maxDispatchErrorBytes = 4 << 10

func dispatchErr(code, msg string) subjects.DispatchReply {
	return subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{Code: code, Message: msg}}
}

// notSentErr is dispatchErr for a request that never left this process (DispatchReply.NotSent).
func notSentErr(code, msg string) subjects.DispatchReply {
	r := dispatchErr(code, msg)
	r.NotSent = true
	return r
}
