package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientEmptyTenantRefused: the empty tenant ("~" in a subject) is no tenant: the executor
// refuses its subjects bad_request (TestRawNATSEmptyTenantIsBadRequest). Submit stored a request
// on calls.~, which the worker refuses with nobody reading, and returned no error; Await then
// waited on results.~ until its context ended. Like a tenant over 1 KiB, it is refused unsent,
// in the executor's words.
func TestClientEmptyTenantRefused(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	req := subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`), Principal: subjects.Principal{User: "local"}}
	want := func(what string, e *subjects.Error) {
		t.Helper()
		if e == nil || e.Code != subjects.CodeBadRequest || !strings.Contains(e.Message, "the tenant is empty") {
			t.Errorf("%s: %+v, want bad_request: the tenant is empty", what, e)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	sent, _, err := r.client.Submit(ctx, "", req)
	var se *subjects.Error
	if !errors.As(err, &se) {
		t.Errorf("Submit: %v (stored as %s), want a *subjects.Error", err, sent.ID)
	} else {
		want("Submit", se)
	}
	res, err := r.client.Await(ctx, "", "c-1")
	if err != nil || res.Status != subjects.CallRefused {
		t.Errorf("Await: %s %v, want refused at once", res.Status, err)
	} else {
		want("Await", res.Error)
	}
	for name, call := range map[string]func(context.Context, string, subjects.CallRequest) (subjects.CallResult, error){
		"Call": r.client.Call, "CallDirect": r.client.CallDirect,
	} {
		res, err := call(ctx, "", req)
		if err != nil || res.Status != subjects.CallRefused {
			t.Errorf("%s: %s %v, want refused", name, res.Status, err)
		} else {
			want(name, res.Error)
		}
	}
}
