package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallDirectAckLost: a request whose PubAck does not arrive (the connection dropped under it
// in a NATS restart: nats.ErrDisconnected; or the JetStream context's publish timeout ran out)
// may be stored all the same, and then it runs. CallDirect answered it refused / unavailable
// ("could not be persisted"), a refusal that says nothing ran, while the executor ran the
// side-effecting call and stored ok: the caller's answer and the call's one stored answer
// disagreed, and a caller trusting the refusal would create the ticket again under a new id.
// Here the PubAck is lost to a publish timeout shorter than any round trip.
func TestCallDirectAckLost(t *testing.T) {
	r := startRig(t, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	nc := r.env.Connect(t)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(1))
	if err != nil {
		t.Fatal(err)
	}
	c := Client{NC: nc, JS: js}
	res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "ack-lost", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if err != nil {
		t.Fatalf("CallDirect: %v", err)
	}
	stored, err := r.client.Await(ctx, "local", "ack-lost")
	if err != nil {
		t.Fatalf("Await: %v", err)
	}
	if res.Status != stored.Status || (res.Error == nil) != (stored.Error == nil) ||
		res.Error != nil && res.Error.Code != stored.Error.Code {
		t.Errorf("CallDirect answered %s %+v; the stored answer is %s %+v", res.Status, res.Error, stored.Status, stored.Error)
	}
	if n := r.ticketCount(); stored.Status == subjects.CallOK && n != 1 {
		t.Errorf("%d tickets for one ok call", n)
	}
}
