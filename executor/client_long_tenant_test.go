package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientLongTenantRefusedBeforeSending: the client bounded the call id (256 bytes) but not
// the tenant, which every subject of a call holds too, each byte of it that is not a letter,
// digit, '_' or '-' three bytes long there: a tenant of 1500 '.' put the exec, calls, results
// or approvals subject past the NATS server's max_control_line (4 KiB), and the server closed
// the caller's connection — every request in flight on it, of every tenant, cut. No executor
// serves such a tenant (the front end and the workers refuse one over subjects.MaxUserBytes):
// every client path refuses it bad_request without sending anything, and the connection
// stays up.
func TestClientLongTenantRefusedBeforeSending(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	c, disconnects := watchedClient(t, r)
	nc := c.NC
	tenant := strings.Repeat(".", 1500) // 4500 bytes in a subject
	req := func(id string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`), Principal: subjects.Principal{User: "local"}}
	}
	wantRefused := func(what string, e *subjects.Error) {
		t.Helper()
		if e == nil || e.Code != subjects.CodeBadRequest || !strings.Contains(e.Message, "at most 1024") {
			t.Errorf("%s: %+v, want bad_request naming the limit", what, e)
		}
		if n := disconnects.Load(); n > 0 {
			t.Fatalf("%s: the caller's connection was closed %d times", what, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	res, err := c.Call(ctx, tenant, req("long-tenant-call"))
	if err != nil {
		t.Errorf("Call: %v", err)
	}
	wantRefused("Call", res.Error)
	res, err = Client{NC: nc}.Call(ctx, tenant, req("long-tenant-call-nojs"))
	if err != nil {
		t.Errorf("Call without JS: %v", err)
	}
	wantRefused("Call without JS", res.Error)
	res, err = c.CallDirect(ctx, tenant, req("long-tenant-calldirect"))
	if err != nil {
		t.Errorf("CallDirect: %v", err)
	}
	wantRefused("CallDirect", res.Error)
	_, _, err = c.Submit(ctx, tenant, req("long-tenant-submit"))
	var se *subjects.Error
	if !errors.As(err, &se) {
		t.Errorf("Submit: %v, want a *subjects.Error", err)
	}
	wantRefused("Submit", se)
	res, err = c.Await(ctx, tenant, "long-tenant-await")
	if err != nil {
		t.Errorf("Await: %v", err)
	}
	wantRefused("Await", res.Error)
	rep, err := c.Decide(ctx, subjects.Approval{ID: "long-tenant-decide", Tenant: tenant, Approve: true})
	if err != nil {
		t.Errorf("Decide: %v", err)
	}
	wantRefused("Decide", rep.Error)

	// The connection serves on, and a tenant at the bound, every byte escaped, is served.
	for _, tn := range []string{"local", strings.Repeat(".", subjects.MaxUserBytes)} {
		res, err = c.Call(ctx, tn, req("after-"+tn[:5]))
		if err != nil || res.Status != subjects.CallOK {
			t.Errorf("a call of a %d-byte tenant: %v %s %+v", len(tn), err, res.Status, res.Error)
		}
	}
	if n := disconnects.Load(); n > 0 {
		t.Errorf("the caller's connection was closed %d times", n)
	}
}
