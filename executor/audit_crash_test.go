package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestAuditResultAfterCrash: an executor that dies right after storing a call's answer, before
// its audit result event is stored (audit events are published after the answer) and before it
// acknowledges the call, leaves the call to another executor, which finds the answer and sends it
// again. The call had no audit result event at all: the redelivery recorded nothing, so the
// audit trail showed a request and a dispatch that never ended.
func TestAuditResultAfterCrash(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	fast := Config{AckWait: time.Second}

	// Executor A reaches NATS through a proxy that cuts it off for good at the PubAck of the
	// first stored answer: A stored the answer and is gone.
	p := startAckCutter(t, r.env.Server.Inner().Addr().String(), subjects.ResultsStream, true)
	ncA, err := nats.Connect("nats://"+p.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	a := r.managerConfig(fast)
	a.FrontEnd = new(bool)
	// A's stop at cleanup cannot drain its consumer through the cut: it gives up after
	// StopGrace (10 s by default), which this test does not look at.
	a.StopGrace = time.Second
	r.startExecutor(a, ncA)
	r.waitTool("ticketing__createIssue")
	if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: "audit-crash", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "executor A cut off", p.cut.Load)

	// Executor B takes the call again after A's AckWait.
	b := r.managerConfig(fast)
	b.FrontEnd = new(bool)
	r.startExecutor(b, r.env.Connect(t))
	res, err := r.client.Await(ctx, "local", "audit-crash")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != subjects.CallOK {
		t.Fatalf("answer %s %+v, want ok", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	waitFor(t, "the call acknowledged", func() bool {
		s, err := r.env.JS.Stream(ctx, subjects.CallsStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	audit, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an audit result event of the call", func() bool {
		m, err := audit.GetLastMsgForSubject(ctx, subjects.Audit("local", subjects.AuditResult))
		if err != nil {
			return false
		}
		var ev subjects.AuditEvent
		return json.Unmarshal(m.Data, &ev) == nil && ev.CallID == "audit-crash" && ev.Decision == subjects.CallOK
	})
}
