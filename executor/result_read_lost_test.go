package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// lossyResultsJS is a JetStream context for a client whose first read of the results stream
// is lost, as a JetStream API request is when it reaches a stream leader that dies under it (a
// cluster node shut down, the leadership moving): nobody answers, nobody says "no responders".
// Its API requests go to a proxy on the test's own connection that passes them on to the real
// API, but for that one read. It returns how many reads were lost.
func lossyResultsJS(t *testing.T, r *rig, nc *nats.Conn) (jetstream.JetStream, *atomic.Int64) {
	t.Helper()
	const prefix = "lossy.API."
	proxy := r.env.Connect(t)
	var lost atomic.Int64
	sub, err := proxy.Subscribe(prefix+">", func(m *nats.Msg) {
		subj := "$JS.API." + strings.TrimPrefix(m.Subject, prefix)
		if strings.Contains(subj, subjects.ResultsStream) && lost.CompareAndSwap(0, 1) {
			return // lost with its leader
		}
		rep, err := proxy.RequestMsg(&nats.Msg{Subject: subj, Data: m.Data, Header: m.Header}, 5*time.Second)
		if err != nil {
			return
		}
		m.RespondMsg(&nats.Msg{Data: rep.Data, Header: rep.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := proxy.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.NewWithAPIPrefix(nc, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return js, &lost
}

// TestCallDirectResultReadLost: CallDirect reads the results stream every 2 s while it waits,
// with the caller's context: a read lost with a dying stream leader (TestClusterNodeFailover,
// node n0 shut down) held its wait loop until the caller's deadline — the answer, sent to its
// inbox seconds later, sat unread, and the caller waited its whole 30 s. Each read is bounded
// now: a lost one costs one poll, and the answer is taken when it comes.
func TestCallDirectResultReadLost(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	nc := r.env.Connect(t)
	js, lost := lossyResultsJS(t, r, nc)
	c := Client{NC: nc, JS: js}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// A call that outlasts the first poll (2 s), whose read is lost.
	res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "read-lost", Tool: "fixture__slow",
		Arguments: json.RawMessage(`{"ms":3000}`), Principal: subjects.Principal{User: "local"}})
	if ctx.Err() != nil {
		t.Errorf("CallDirect returned after the caller's deadline: a lost results read held its wait")
	}
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("CallDirect: %v %s %+v", err, res.Status, res.Error)
	}
	if lost.Load() != 1 {
		t.Fatalf("no results read was lost (the test did not test it)")
	}
}

// TestAwaitResultReadLost: Await's first read of the results stream, lost with its leader, held
// it until the caller's deadline and ended it with an error, though the answer came meanwhile.
func TestAwaitResultReadLost(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	nc := r.env.Connect(t)
	js, lost := lossyResultsJS(t, r, nc)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	sent, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: "await-lost", Tool: "fixture__slow",
		Arguments: json.RawMessage(`{"ms":500}`), Principal: subjects.Principal{User: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Client{NC: nc, JS: js}.Await(ctx, "local", sent.ID)
	if ctx.Err() != nil {
		t.Errorf("Await returned after the caller's deadline: a lost results read held its wait")
	}
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("Await: %v %s %+v", err, res.Status, res.Error)
	}
	if lost.Load() != 1 {
		t.Fatalf("no results read was lost (the test did not test it)")
	}
}
