package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestLongIDOfMalformedCall: a call request that is JSON but not a valid CallRequest (a
// timeoutMs that is a string, say) is refused bad_request to the id it holds, read on its own,
// and that id had no bound: a 4000-byte id took the claim look-up and the results subject of
// the refusal past the server's max_control_line, and the server closed the executor's
// connection (every call in flight on it cut), again at each redelivery. An id past maxCallID
// is no id to answer to, as for a valid request: the audit stream keeps the evidence.
func TestLongIDOfMalformedCall(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	var disconnects atomic.Int64
	nc, err := nats.Connect(r.env.URL, nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.startExecutor(r.managerConfig(Config{}), nc)
	r.waitTool("fixture__echo")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := strings.Repeat("i", 4000)
	if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(`{"id":"`+id+`","tool":"fixture__echo","timeoutMs":"soon"}`)); err != nil {
		t.Fatal(err)
	}
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var ev subjects.AuditEvent
	waitFor(t, "the decision event, or a disconnect", func() bool {
		if disconnects.Load() > 0 {
			return true
		}
		m, err := stream.GetLastMsgForSubject(ctx, subjects.Audit("local", subjects.AuditDecision))
		return err == nil && json.Unmarshal(m.Data, &ev) == nil && ev.Code == subjects.CodeBadRequest
	})
	if n := disconnects.Load(); n > 0 {
		t.Fatalf("the executor's connection was closed %d times by a malformed call with a 4000-byte id", n)
	}
	if res := r.call("local", "fixture__echo", `{"text":"still serving"}`); res.Status != subjects.CallOK {
		t.Errorf("next call: %s %+v", res.Status, res.Error)
	}
	if n := disconnects.Load(); n > 0 {
		t.Errorf("the executor's connection was closed %d times", n)
	}
}
