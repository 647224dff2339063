package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallOnSubjectWithExtraTokensRefused: the calls stream captures mcpstream.v1.calls.>, but
// the documented subject of a call is exactly mcpstream.v1.calls.<tenant>. A call published
// with more tokens (mcpstream.v1.calls.local.x) is not the tenant's call: it is refused
// bad_request on its Mcpstream-Reply-To inbox, recorded in the audit stream under the token no
// tenant has, settled (nothing left to redeliver), and never run or answered on the results
// stream of the tenant its second token names.
func TestCallOnSubjectWithExtraTokensRefused(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	inbox := nats.NewInbox()
	got := make(chan *nats.Msg, 4)
	sub, err := r.env.NC.ChanSubscribe(inbox, got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	results, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ id, subject string }{
		{"extra-1", subjects.Calls("local") + ".x"},
		{"extra-2", subjects.Calls("local") + ".x.y"},
	} {
		req := subjects.CallRequest{V: 1, ID: tc.id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"x"}`),
			Principal: subjects.Principal{User: "local"}}
		data, _ := json.Marshal(req)
		m := &nats.Msg{Subject: tc.subject, Data: data, Header: nats.Header{}}
		m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID("local", tc.id))
		m.Header.Set(subjects.HeaderReplyTo, inbox)
		if _, err := r.env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-got:
			var res subjects.CallResult
			if err := json.Unmarshal(a.Data, &res); err != nil {
				t.Fatalf("%s: answer is not a CallResult: %v: %s", tc.subject, err, a.Data)
			}
			if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeBadRequest ||
				!strings.Contains(res.Error.Message, tc.subject) {
				t.Errorf("%s: answered %s %+v; want refused bad_request naming the subject", tc.subject, res.Status, res.Error)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no answer on the reply inbox", tc.subject)
		}
		r.waitCallsSettled(ctx) // settled, not left to redeliver

		var ev subjects.AuditEvent
		waitFor(t, "the decision event of "+tc.id, func() bool {
			m, err := audit.GetLastMsgForSubject(ctx, subjects.AuditNoTenant(subjects.AuditDecision))
			return err == nil && json.Unmarshal(m.Data, &ev) == nil && ev.CallID == tc.id
		})
		if ev.Code != subjects.CodeBadRequest || ev.Tenant != "" || !strings.Contains(ev.Message, tc.subject) {
			t.Errorf("%s: decision event %+v", tc.subject, ev)
		}
		if _, err := results.GetLastMsgForSubject(ctx, subjects.Result("local", tc.id)); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("%s: an answer is stored for tenant local's call %s (%v): it ran as local's call", tc.subject, tc.id, err)
		}
		if evs := r.auditEvents("local", tc.id); len(evs) != 0 {
			t.Errorf("%s: recorded as tenant local's call: %+v", tc.subject, evs)
		}
	}

	// The front end's subscription (exec.*) takes one token only: a request with more finds
	// no responder, and nothing is stored.
	if _, err := r.env.NC.RequestWithContext(ctx, subjects.Exec("local")+".x", []byte(`{"v":1,"id":"extra-3","tool":"fixture__echo","arguments":{"text":"x"}}`)); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request on %s.x: %v; want no responders", subjects.Exec("local"), err)
	}

	if res := r.call("local", "fixture__echo", `{"text":"still serving"}`); res.Status != subjects.CallOK {
		t.Errorf("next call: %s %+v", res.Status, res.Error)
	}
}
