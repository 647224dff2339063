package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallWithoutTenantAudited: a call message on a subject with no valid tenant token cannot
// be answered (the results subject needs the tenant); the audit stream keeps it, under the token
// no tenant has, and the worker goes on.
func TestCallWithoutTenantAudited(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := r.env.JS.Publish(ctx, subjects.Root+".calls.a~ZZ", []byte(`{"id":"bad-tenant-1","tool":"fixture__echo","arguments":{"text":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var ev subjects.AuditEvent
	waitFor(t, "the decision event", func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, subjects.AuditNoTenant(subjects.AuditDecision))
		return err == nil && json.Unmarshal(m.Data, &ev) == nil
	})
	if ev.CallID != "bad-tenant-1" || ev.Code != subjects.CodeBadRequest || !strings.Contains(ev.Message, "calls.a~ZZ") {
		t.Errorf("decision event %+v", ev)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, subjects.AuditNoTenant(subjects.AuditRequest)); err != nil {
		t.Errorf("no request event: %v", err)
	}
	if res := r.call("local", "fixture__echo", `{"text":"still serving"}`); res.Status != subjects.CallOK {
		t.Errorf("next call: %s %+v", res.Status, res.Error)
	}
}
