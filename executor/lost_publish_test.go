package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallDirectLostPublish: CallDirect's request never reaches the calls stream and no PubAck
// or error comes back, on a connection that stays up, through a JetStream context made without
// an async publish timeout (jetstream.New(nc), as callers do). CallDirect waited for that PubAck
// until its caller's deadline, and the call never ran: in the 3-node failover test, a call
// published as its stream's leader died got no answer in 30 s. Past PubAckWait the request is
// published again under the same id; it runs once and is answered.
func TestCallDirectLostPublish(t *testing.T) {
	r := startRig(t, rigOptions{})
	// The proxy loses the client's first publish to the calls subject, and only it: the
	// connection stays up, the server never sees that message, and no PubAck comes — as when a
	// publish reaches a node that forwards it to a stream leader dying under it (seen in the
	// 3-node failover test).
	var first atomic.Bool
	p := startDropper(t, r.env.Server.Inner().Addr().String(), func(subject string, _ []byte) bool {
		return subject == subjects.Calls("local") && first.CompareAndSwap(false, true)
	})
	c := clientVia(t, p, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "lost-publish", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if p.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped no publish")
	}
	if err != nil {
		t.Fatalf("CallDirect after a lost publish: %v", err)
	}
	if res.Status != subjects.CallOK || res.Error != nil || res.Duplicate {
		t.Errorf("answer %s %+v (duplicate %v), want ok", res.Status, res.Error, res.Duplicate)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}
