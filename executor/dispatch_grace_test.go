package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The connector times a call out on its own clock, started when the request reaches it: its
// answer (a result that came at the last moment, or its own timeout) comes after the caller's
// deadline. NATSDispatcher waits Grace past the call's timeout for it, even when the caller's
// context ends at that timeout (the executor's does): the answer is not replaced by a guess.
func TestNATSDispatcherWaitsGracePastDeadline(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sub, err := env.NC.Subscribe(subjects.Dispatch("srv"), func(m *nats.Msg) {
		<-ctx.Done() // the caller's deadline has passed: the connector's answer comes now
		_ = m.Respond([]byte(`{"v":1,"result":{"content":[{"type":"text","text":"created"}]}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	d := NATSDispatcher{NC: env.NC, Grace: time.Minute}
	rep := d.Dispatch(ctx, "srv", subjects.DispatchRequest{V: subjects.Version, CallID: "c1", Tool: "create", TimeoutMs: 200})
	if rep.Error != nil {
		t.Fatalf("got error %+v, want the connector's result (it came within the grace)", rep.Error)
	}
	if string(rep.Result) != `{"content":[{"type":"text","text":"created"}]}` {
		t.Errorf("got result %s", rep.Result)
	}
}

// lateAnswer answers each dispatch once the caller's context has ended, with the error code
// its arguments' text names: what a connector's answer that arrives within NATSDispatcher's
// grace looks like.
type lateAnswer struct{}

func (lateAnswer) Dispatch(ctx context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	<-ctx.Done()
	var args struct{ Text string }
	_ = json.Unmarshal(req.Arguments, &args)
	return subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{Code: args.Text, Message: "the connector's own words"}}
}

// An answer that says what happened keeps its code when it comes after the deadline: only a
// guess (outcome_unknown, transport_error) becomes timeout.
func TestLateDispatchAnswerKeepsItsCode(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{Dispatcher: lateAnswer{}, Relister: r.mgr}, r.env.NC)
	r.waitTool("fixture__echo")
	for _, tc := range []struct{ code, want string }{
		{subjects.CodeResultTooLarge, subjects.CodeResultTooLarge},
		{subjects.CodeProtocolError, subjects.CodeProtocolError},
		{subjects.CodeOutcomeUnknown, subjects.CodeTimeout},
		{subjects.CodeTransportError, subjects.CodeTimeout},
	} {
		res := r.call("local", "fixture__echo", `{"text":"`+tc.code+`"}`, func(req *subjects.CallRequest) { req.TimeoutMs = 100 })
		if res.Error == nil || res.Error.Code != tc.want {
			t.Errorf("late %s: got %s %+v, want %s", tc.code, res.Status, res.Error, tc.want)
		}
	}
}

// Arguments reach the connector as the caller sent them: json.Marshal escaped each <, > and &
// as six bytes (\u003c), so HTML arguments well under the 4 MiB a call may hold grew past what
// a NATS message holds, and the call, never sent, was answered outcome_unknown ("may have run").
func TestNATSDispatcherArgumentsNotEscaped(t *testing.T) {
	env := natstest.Start(t)
	args := json.RawMessage(`{"html":"` + strings.Repeat("<p>a&amp;b</p>", 250<<10) + `"}`) // 3.4 MiB
	sub, err := env.NC.Subscribe(subjects.Dispatch("srv"), func(m *nats.Msg) {
		var req subjects.DispatchRequest
		text := "malformed"
		if json.Unmarshal(m.Data, &req) == nil {
			text = strconv.FormatBool(bytes.Equal(req.Arguments, args))
		}
		_ = m.Respond([]byte(`{"v":1,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := NATSDispatcher{NC: env.NC}.Dispatch(ctx, "srv", subjects.DispatchRequest{V: subjects.Version, CallID: "c1", Tool: "publish", Arguments: args, TimeoutMs: 30000})
	if rep.Error != nil {
		t.Fatalf("got error %+v, want the connector's result", rep.Error)
	}
	if !strings.Contains(string(rep.Result), `"text":"true"`) {
		t.Errorf("got result %s: the arguments did not arrive as sent", rep.Result)
	}
}

// A dispatch request NATS cannot carry is refused by the client before it is published: the
// call was not sent, which outcome_unknown ("may have run") would deny.
func TestNATSDispatcherTooLargeNotSent(t *testing.T) {
	env := natstest.Start(t)
	args := json.RawMessage(`{"blob":"` + strings.Repeat("a", int(env.NC.MaxPayload())) + `"}`)
	rep := NATSDispatcher{NC: env.NC}.Dispatch(context.Background(), "srv", subjects.DispatchRequest{V: subjects.Version, CallID: "c1", Tool: "t", Arguments: args, TimeoutMs: 1000})
	if rep.Error == nil || !notSent(rep.Error.Code) {
		t.Errorf("got %+v, want an error that says nothing was sent", rep.Error)
	}
}
