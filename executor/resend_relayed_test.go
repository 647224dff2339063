package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestResendPastWindowRelayedIsDuplicate: a call id resent once the calls and results streams'
// de-duplication windows are past, by a caller the front end answers (its reply subject is not
// under the reply prefixes), gets the stored answer marked duplicate, as every other resend.
// The front end relayed the first answer published on the results subject, which the results
// stream may have refused: the resend's own answer (a refusal, or a read-only tool's new
// result), not the call's stored answer (an ok), and not marked duplicate.
func TestResendPastWindowRelayedIsDuplicate(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigOptions{servers: []string{"ticketing", "fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream, subjects.ResultsStream)
	nc, err := nats.Connect(r.env.NC.ConnectedUrl(), nats.CustomInboxPrefix("_CUSTOM.inbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	relayed := Client{NC: nc}
	for _, tc := range []struct{ id, tool, args, resent string }{
		// The resend is refused before dispatch (its arguments no longer validate): the call
		// ran, its answer stays the one it got.
		{"relayed-side-effect", "ticketing__createIssue", `{"title":"Once","body":"b","priority":"low"}`, `{"title":5}`},
		// A read-only call may run again; its answer is the stored one.
		{"relayed-read-only", "fixture__echo", `{"text":"once"}`, `{"text":"twice"}`},
	} {
		req := subjects.CallRequest{ID: tc.id, Tool: tc.tool, Arguments: json.RawMessage(tc.args), Principal: subjects.Principal{User: "local"}}
		first, err := relayed.Call(ctx, "local", req)
		if err != nil || first.Status != subjects.CallOK || first.Duplicate {
			t.Fatalf("%s: got %+v, %v; want ok", tc.id, first, err)
		}
		time.Sleep(window + 200*time.Millisecond) // both streams forget the id
		req.Arguments = json.RawMessage(tc.resent)
		again, err := relayed.Call(ctx, "local", req)
		if err != nil {
			t.Fatal(err)
		}
		if again.Status != subjects.CallOK || string(again.Result) != string(first.Result) || !again.Duplicate {
			t.Errorf("%s: resend got %s %s (duplicate %v), want the stored %s, duplicate", tc.id, again.Status, again.Result, again.Duplicate, first.Result)
		}
	}
}
