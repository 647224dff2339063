package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRelayIgnoresJunkWithTheCallID: junk published on a call's results subject that names the
// call's id but is no CallResult (the results stream keeps it, and no answer reads it: see
// storedResult, isAnswerOf) is not the answer the front end relays either. The front end
// relayed it: nothing was stored (the junk is not an answer), so it took the junk for this
// request's answer being stored, and the caller got junk while the call went on.
func TestRelayIgnoresJunkWithTheCallID(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}, noExecutor: true})
	hold := holdCreateIssue(t, r)
	r.startExecutor(Config{Dispatcher: hold, Relister: r.mgr}, r.env.NC)
	r.waitTool("ticketing__createIssue")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	nc, err := nats.Connect(r.env.NC.ConnectedUrl(), nats.CustomInboxPrefix("_CUSTOM.inbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	relayed := Client{NC: nc}
	req := subjects.CallRequest{ID: "relayed-junk", Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Once","body":"b","priority":"low"}`)}
	type answer struct {
		res subjects.CallResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := relayed.Call(ctx, "local", req)
		answered <- answer{res, err}
	}()
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the call was never dispatched")
	}
	if err := r.env.NC.Publish(subjects.Result("local", req.ID), []byte(`{"id":"relayed-junk","status":5}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	hold.letGo()
	a := <-answered
	if a.err != nil || a.res.Status != subjects.CallOK {
		t.Errorf("got %+v, %v; want the call's ok", a.res, a.err)
	}
}
