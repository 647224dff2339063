package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestLongTenantToken: the tenant token of a calls subject had no bound but what the caller's
// NATS control line holds (4 KiB), while the executor publishes on longer subjects built from it
// (rate counters mcpstream.v1.limits.tenant.<tenant>.<window>, results with the call id, claims):
// a 4000-byte tenant took the executor's rate counter publish past the server's
// max_control_line, and the server closed the executor's connection — every call of every tenant
// in flight on it cut, once per such message. A tenant is bounded like principal.tenant (1 KiB):
// a longer one is no valid tenant token.
func TestLongTenantToken(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	var disconnects atomic.Int64
	nc, err := nats.Connect(r.env.URL, nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.startExecutor(r.managerConfig(Config{Limits: Limits{Tenant: Rate{PerSecond: 100}}}), nc)
	r.waitTool("fixture__echo")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	tenant := strings.Repeat("t", 4000)
	if _, err := r.env.JS.Publish(ctx, subjects.Calls(tenant), []byte(`{"id":"long-tenant","tool":"fixture__echo","arguments":{"text":"x"},"principal":{"user":"local"}}`)); err != nil {
		t.Fatal(err)
	}
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var ev subjects.AuditEvent
	waitFor(t, "the decision event, or a disconnect", func() bool {
		if disconnects.Load() > 0 {
			return true
		}
		m, err := stream.GetLastMsgForSubject(ctx, subjects.AuditNoTenant(subjects.AuditDecision))
		return err == nil && json.Unmarshal(m.Data, &ev) == nil && ev.CallID == "long-tenant"
	})
	if n := disconnects.Load(); n > 0 {
		t.Fatalf("the executor's connection was closed %d times by a call of a 4000-byte tenant", n)
	}
	if ev.Code != subjects.CodeBadRequest {
		t.Errorf("decision event %+v, want bad_request", ev)
	}

	// Through the front end (a raw request: the Go client refuses such a tenant unsent):
	// refused with bad_request, answered.
	var res subjects.CallResult
	m, err := r.env.NC.RequestWithContext(ctx, subjects.Exec(tenant), []byte(`{"id":"long-tenant-2","tool":"fixture__echo","arguments":{"text":"x"}}`))
	if err == nil {
		err = json.Unmarshal(m.Data, &res)
	}
	if err != nil || res.Error == nil || res.Error.Code != subjects.CodeBadRequest || !strings.Contains(res.Error.Message, "at most 1024") {
		t.Errorf("front end: %v %+v", err, res.Error)
	}
	// A tenant of 1 KiB is served, also when every byte of it and of the longest call id is
	// escaped in subjects (3 bytes each): the results subject and the claim key then hold 3 KiB
	// of tenant and 768 bytes of id.
	if res := r.call(strings.Repeat("t", subjects.MaxUserBytes), "fixture__echo", `{"text":"hi"}`); res.Status != subjects.CallOK {
		t.Errorf("a tenant of %d bytes: %s %+v", subjects.MaxUserBytes, res.Status, res.Error)
	}
	if res := r.call(strings.Repeat(".", subjects.MaxUserBytes), "fixture__echo", `{"text":"hi"}`, func(req *subjects.CallRequest) {
		req.ID = strings.Repeat(".", maxCallID)
	}); res.Status != subjects.CallOK {
		t.Errorf("a tenant of %d escaped bytes: %s %+v", subjects.MaxUserBytes, res.Status, res.Error)
	}
	if res := r.call("local", "fixture__echo", `{"text":"still serving"}`); res.Status != subjects.CallOK {
		t.Errorf("next call: %s %+v", res.Status, res.Error)
	}
	if n := disconnects.Load(); n > 0 {
		t.Errorf("the executor's connection was closed %d times", n)
	}
}
