package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// bigResults answers every dispatch with a result of size bytes, counting dispatches by tool.
type bigResults struct {
	n    *counter
	size int
}

func (b bigResults) Dispatch(_ context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	b.n.add(req.Tool)
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", b.size) + `"}]}`)}
}

// TestResultOverMaxPayload: a NATS server whose max_payload is below the executor's result
// limit (nats-server's default is 1 MiB; the executor takes results up to 4 MiB from
// connectors in its own process) could never store the answer of a larger result: the worker
// retried storing it, the call was delivered again and again — a read-only tool ran once per
// delivery, and the caller got internal ("delivered 5 times without an answer") after
// seconds; a side-effecting one got outcome_unknown, though it ran and its result was merely
// too large. A result that no answer can carry is result_too_large at once: the call ran,
// once, and is not retried.
func TestResultOverMaxPayload(t *testing.T) {
	n := &counter{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, nats: natsembed.Config{MaxPayload: 1 << 20},
		exec: Config{Dispatcher: bigResults{n: n, size: 2 << 20}}})
	for _, tool := range []string{"echo", "exit"} { // read-only; side-effecting (the fake never runs it)
		res := r.call("local", "fixture__"+tool, `{"text":"a"}`)
		if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeResultTooLarge ||
			!strings.Contains(res.Error.Message, "the call ran") {
			t.Errorf("%s: got %s %+v, want failed result_too_large (the call ran)", tool, res.Status, res.Error)
		}
		if got := n.get(tool); got != 1 {
			t.Errorf("%s: dispatched %d times, want once", tool, got)
		}
	}
	// A result that fits is answered as it is.
	small := startRig(t, rigOptions{servers: []string{"fixture"}, nats: natsembed.Config{MaxPayload: 1 << 20},
		exec: Config{Dispatcher: bigResults{n: &counter{}, size: 1<<20 - 8<<10}}})
	if res := small.call("local", "fixture__echo", `{"text":"a"}`); res.Status != subjects.CallOK {
		t.Errorf("a result of 1 MiB less 8 KiB: got %s %+v, want ok", res.Status, res.Error)
	}
}
