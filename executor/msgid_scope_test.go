package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestMsgIDOfAnotherTenant: JetStream de-duplicates the calls stream by Nats-Msg-Id across the
// whole stream, whatever the subject, and a tenant allowed to publish on its own calls subject
// chooses its headers. A message on calls.acme carrying globex's key call:globex:<id> used to
// make globex's call with that id a "resend" that never ran: Call and CallDirect waited for an
// answer that never came (the front end for 6 minutes), Submit said duplicate. The call is now
// refused at once, bad_request, whether the squatting message is still in the stream or was
// answered already.
func TestMsgIDOfAnotherTenant(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	// squat publishes, as tenant acme, a call of its own under globex's key for id.
	squat := func(id, acmeID, args string) {
		t.Helper()
		tool := "fixture__echo"
		if args == "" {
			tool, args = "fixture__slow", `{"ms":3000}`
		}
		data, _ := json.Marshal(subjects.CallRequest{V: 1, ID: acmeID, Tool: tool, Arguments: json.RawMessage(args),
			Principal: subjects.Principal{User: "local"}})
		m := &nats.Msg{Subject: subjects.Calls("acme"), Data: data, Header: nats.Header{}}
		m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID("globex", id))
		if _, err := r.env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	req := func(id string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"globex"}`),
			Principal: subjects.Principal{User: "local"}}
	}
	refusedFast := func(what string, res subjects.CallResult, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v; want a refusal at once", what, err)
			return
		}
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeBadRequest || res.Tenant != "globex" {
			t.Errorf("%s: %s %+v (tenant %q), want refused bad_request for globex", what, res.Status, res.Error, res.Tenant)
		}
	}

	// The squatting message answered already (gone from the work queue).
	squat("g-1", "a-1", `{"text":"acme"}`)
	if res, err := r.client.Await(ctx, "acme", "a-1"); err != nil || res.Status != subjects.CallOK {
		t.Fatalf("acme's own call: %+v %v", res, err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := r.client.Call(cctx, "globex", req("g-1"))
	ccancel()
	refusedFast("Call (front end), squatter answered", res, err)
	cctx, ccancel = context.WithTimeout(ctx, 10*time.Second)
	res, err = r.client.CallDirect(cctx, "globex", req("g-1"))
	ccancel()
	refusedFast("CallDirect, squatter answered", res, err)

	// The squatting message still in the stream (running).
	squat("g-2", "a-2", "")
	cctx, ccancel = context.WithTimeout(ctx, 10*time.Second)
	res, err = r.client.Call(cctx, "globex", req("g-2"))
	ccancel()
	refusedFast("Call (front end), squatter running", res, err)
	cctx, ccancel = context.WithTimeout(ctx, 10*time.Second)
	res, err = r.client.CallDirect(cctx, "globex", req("g-2"))
	ccancel()
	refusedFast("CallDirect, squatter running", res, err)
	if _, dup, err := r.client.Submit(ctx, "globex", req("g-2")); err == nil {
		t.Errorf("Submit: no error (duplicate %v); want the id refused", dup)
	}

	// globex's own resends are still resends, and acme's call ran as acme's.
	first := r.call("globex", "fixture__echo", `{"text":"once"}`, func(q *subjects.CallRequest) { q.ID = "g-3" })
	again := r.call("globex", "fixture__echo", `{"text":"once"}`, func(q *subjects.CallRequest) { q.ID = "g-3" })
	if first.Status != subjects.CallOK || !again.Duplicate || string(again.Result) != string(first.Result) {
		t.Errorf("resend: first %s, again %s duplicate %v", first.Status, again.Status, again.Duplicate)
	}
	if res, err := r.client.Await(ctx, "acme", "a-2"); err != nil || res.Status != subjects.CallOK {
		t.Errorf("acme's slow call: %+v %v", res, err)
	}
}
