package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// A process that calls with CallDirect on connections it opens and closes (one per job, per
// tenant's credentials, or after a fatal error) must not keep every closed connection: the
// answer muxes were kept per connection for the life of the process, each holding its
// connection (buffers, subscriptions) long after it closed.
func TestCallDirectForgetsClosedConnections(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	const n = 20
	for i := range n {
		nc, err := nats.Connect(r.env.URL)
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		res, err := Client{NC: nc, JS: js}.CallDirect(ctx, "acme", subjects.CallRequest{
			ID: fmt.Sprintf("churn-%d", i), Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`),
			Principal: subjects.Principal{User: "local"}})
		cancel()
		if err != nil || res.Status != subjects.CallOK {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		nc.Close()
	}
	closed := 0
	answerMuxes.Range(func(k, _ any) bool {
		if k.(*nats.Conn).IsClosed() {
			closed++
		}
		return true
	})
	if closed > 1 {
		t.Errorf("%d closed connections still held after %d opened, called on and closed", closed, n)
	}
}
