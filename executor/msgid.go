package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// ErrCallIDTaken is returned (wrapped) by Client.Submit for a call id whose de-duplication key
// a message on another tenant's subject holds (see idTaken).
var ErrCallIDTaken = errors.New("call id held by a message of another tenant")

// idTaken reports whether the message holding the de-duplication key of tenant's call id in the
// calls stream (stream sequence seq, as a duplicate PubAck names it) is not one of tenant's
// calls. JetStream de-duplicates by Nats-Msg-Id over the whole stream, and publishers choose
// their headers: a tenant allowed on its own calls subject can publish under another tenant's
// key (call:<tenant>:<id>), and that tenant's call with this id would then never run while its
// caller waits. A call of tenant stays on subjects.Calls(tenant) until its answer is stored, so
// the holder is another's when it is on another subject, or gone without an answer. Lookups
// that fail report false (the caller waits, as for a resend).
func idTaken(ctx context.Context, js jetstream.JetStream, tenant, id string, seq uint64) bool {
	if seq == 0 {
		return false
	}
	calls, err := js.Stream(ctx, subjects.CallsStream)
	if err != nil {
		return false
	}
	m, err := calls.GetMsg(ctx, seq)
	if err == nil {
		return m.Subject != subjects.Calls(tenant)
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	results, err := js.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		return false
	}
	_, ok, err := getResult(ctx, results, tenant, id)
	return err == nil && !ok
}

// idTakenRefusal is the answer to a call whose id another tenant's message holds.
func idTakenRefusal(tenant string, req subjects.CallRequest) subjects.CallResult {
	return refusal(tenant, req, subjects.CallRefused, &subjects.Error{Code: subjects.CodeBadRequest,
		Message: fmt.Sprintf("call id %q is held on the calls stream by a message published on another subject under this tenant's Nats-Msg-Id (%s): send the call with another id",
			req.ID, subjects.CallMsgID(tenant, req.ID))})
}
