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

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// gated counts dispatches by tool, tells each one's start, and answers once release is closed.
type gated struct {
	n       *counter
	started chan string
	release chan struct{}
}

func (g gated) Dispatch(ctx context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	g.n.add(req.Tool)
	select {
	case g.started <- req.Tool:
	default:
	}
	<-g.release
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"done: ` + req.Tool + `"}]}`)}
}

// TestAnswerKeptWhileStoreFull: JetStream out of storage (max_file_store reached) while calls
// run. Their answers could not be stored: the worker gave up after a few seconds and handed
// the call back, and each delivery ran a read-only tool again, while a side-effecting one,
// whose result the worker held, was answered outcome_unknown once there was room again; the
// read-only one ended internal ("delivered 6 times without an answer; it is not run again",
// though it ran four times), and a call whose deliveries ran out before there was room was
// never answered at all. A worker keeps an answer it could not store for lack of room and
// stores it once there is room: each call ran once, and its caller gets its result.
func TestAnswerKeptWhileStoreFull(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	n := &counter{}
	g := gated{n: n, started: make(chan string, 4), release: make(chan struct{})}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, nats: natsembed.Config{MaxStore: 4 << 20}, exec: Config{Dispatcher: g}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()

	tools := map[string]string{"echo": "full-read-only", "exit": "full-side-effect"}
	attempts := map[string]*atomic.Int64{}
	answers := map[string]chan subjects.CallResult{}
	for tool, id := range tools {
		// Every attempt to store the answer is a publish on its results subject, stored or not.
		var a atomic.Int64
		attempts[tool] = &a
		sub, err := r.env.NC.Subscribe(subjects.Result("local", id), func(*nats.Msg) { a.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		answers[tool] = make(chan subjects.CallResult, 1)
		go func() {
			res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__" + tool, Arguments: json.RawMessage(`{"text":"a"}`)})
			if err != nil {
				res.Error = &subjects.Error{Code: "client", Message: err.Error()}
			}
			answers[tool] <- res
		}()
		<-g.started
	}

	// The store fills up while both run.
	junk := []byte(strings.Repeat("j", 64<<10))
	for i := 0; ; i++ {
		if _, err := r.env.JS.Publish(ctx, "mcpstream.v1.audit.junk.fill", junk); err != nil {
			if !subjects.OutOfStorage(err) {
				t.Fatalf("filling the store: %v", err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("the store never filled")
		}
	}
	close(g.release)
	// Long enough for the worker to give up storing and the call to come again (seven
	// attempts a delivery before the fix).
	for tool, a := range attempts {
		waitFor(t, "8 attempts to store the answer of "+tool, func() bool { return a.Load() >= 8 })
	}
	audit, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Purge(ctx, jetstream.WithPurgeSubject("mcpstream.v1.audit.junk.fill")); err != nil {
		t.Fatal(err)
	}

	for tool := range tools {
		var res subjects.CallResult
		select {
		case res = <-answers[tool]:
		case <-time.After(2 * waitLimit):
			t.Fatalf("%s: no answer", tool)
		}
		if res.Status != subjects.CallOK || !strings.Contains(string(res.Result), "done: "+tool) {
			t.Errorf("%s: got %s %+v %s, want ok with its result", tool, res.Status, res.Error, res.Result)
		}
		if got := n.get(tool); got != 1 {
			t.Errorf("%s: dispatched %d times, want once", tool, got)
		}
	}
}
