package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientEmptyTenantRefusedBeforeSending: the empty tenant is no tenant (its token "~" is
// refused bad_request by the front end and the workers, README), but the client sent it: Submit
// stored the request on calls.~ and returned no error, the worker refused it with no answer
// stored (no results subject has it), and Await of that tenant waited for nothing until its
// context ended — the caller never told. Every client path refuses it bad_request unsent, in the
// services' words, as it refuses a tenant over subjects.MaxUserBytes; Decide still reads an
// Approval without a tenant as the local tenant's.
func TestClientEmptyTenantRefusedBeforeSending(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	c := r.client
	req := func(id string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`), Principal: subjects.Principal{User: "local"}}
	}
	wantRefused := func(what string, e *subjects.Error) {
		t.Helper()
		if e == nil || e.Code != subjects.CodeBadRequest || !strings.Contains(e.Message, "the tenant is empty") {
			t.Errorf("%s: %+v, want bad_request saying the tenant is empty", what, e)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	_, _, err := c.Submit(ctx, "", req("empty-tenant-submit"))
	var se *subjects.Error
	if !errors.As(err, &se) {
		t.Errorf("Submit: %v, want a *subjects.Error", err)
	}
	wantRefused("Submit", se)
	// (Before: it waited until ctx ended, for an answer no executor stores.)
	res, err := c.Await(ctx, "", "empty-tenant-submit")
	if err != nil {
		t.Errorf("Await: %v", err)
	}
	wantRefused("Await", res.Error)
	res, err = c.CallDirect(ctx, "", req("empty-tenant-calldirect"))
	if err != nil {
		t.Errorf("CallDirect: %v", err)
	}
	wantRefused("CallDirect", res.Error)
	res, err = c.Call(ctx, "", req("empty-tenant-call"))
	if err != nil {
		t.Errorf("Call: %v", err)
	}
	wantRefused("Call", res.Error)

	// An approval without a tenant is the local tenant's: sent there (nobody waits).
	if _, err := c.Decide(ctx, subjects.Approval{ID: "empty-tenant-decide", Approve: true}); !errors.Is(err, ErrNoWaiter) {
		t.Errorf("Decide without a tenant: %v, want ErrNoWaiter", err)
	}
	if res, err := c.Call(ctx, "local", req("empty-tenant-after")); err != nil || res.Status != subjects.CallOK {
		t.Errorf("a call of the local tenant after them: %v %s %+v", err, res.Status, res.Error)
	}
}
