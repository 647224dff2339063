package executor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientIDNotUTF8: a call id holding bytes that are not UTF-8 is sent as JSON carries it
// (each such byte U+FFFD): the executor answers that id, on that id's results subject. The
// client kept the id as given, so CallDirect dropped the answer as another call's (its id
// differs) and read another results subject, and Await (after Submit) did the same: the call
// ran, and its caller waited until its deadline for an answer that had come. Every client
// path gets the answer, to the id it was sent with.
func TestClientIDNotUTF8(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	for _, mode := range []string{"Call", "CallDirect", "Submit+Await"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			req := subjects.CallRequest{ID: "c-\xff\xfe-" + mode, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`),
				Principal: subjects.Principal{User: "local"}}
			want := "c-\ufffd\ufffd-" + mode
			var res subjects.CallResult
			var err error
			switch mode {
			case "Call":
				res, err = r.client.Call(ctx, "local", req)
			case "CallDirect":
				res, err = r.client.CallDirect(ctx, "local", req)
			case "Submit+Await":
				var sent subjects.CallRequest
				if sent, _, err = r.client.Submit(ctx, "local", req); err != nil {
					t.Fatal(err)
				}
				if sent.ID != want {
					t.Errorf("Submit sent id %q, want %q", sent.ID, want)
				}
				// Awaited by the id as the caller has it, or as it was sent.
				if res, err = r.client.Await(ctx, "local", req.ID); err == nil && res.ID == want {
					res, err = r.client.Await(ctx, "local", sent.ID)
				}
			}
			if err != nil || res.Status != subjects.CallOK || res.ID != want {
				t.Fatalf("got %q %s %+v, %v; want the answer of %q", res.ID, res.Status, res.Error, err, want)
			}
		})
	}
}
