package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestFrontEndReplyIntoOwnSubjects: NATS checks a publisher's permissions on the subject it
// publishes to, never on the reply subject it names, and the front end answered any reply
// subject with the executor's own permissions. A tenant allowed only on mcpstream.v1.exec.acme
// (as README advises) could so have the executor write its answers for it into another
// tenant's subjects: onto mcpstream.v1.calls.globex, where the answer ({"id","tool",...}) ran
// as globex's call; onto globex's results subject of a call id, where globex's call then got
// acme's answer; onto globex's concurrency slots in the KV bucket, where globex was refused
// rate_limited. A request whose reply subject is one of mcpstream's or the server's "$"
// subjects is now dropped: nothing runs, nothing is written.
func TestFrontEndReplyIntoOwnSubjects(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Limits: Limits{Tenant: Rate{Concurrency: 1}}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	// acme's requests, each refused at once (v 2) with its id and tool in the refusal.
	acme := r.env.Connect(t)
	hostile := func(reply, id, tool string) {
		t.Helper()
		body := `{"v":2,"id":"` + id + `","tool":"` + tool + `"}`
		if err := acme.PublishMsg(&nats.Msg{Subject: subjects.Exec("acme"), Reply: reply, Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	hostile(subjects.Calls("globex"), "evil-1", "fixture__fail")
	hostile(subjects.Result("globex", "g-1"), "g-1", "fixture__echo")
	hostile("$KV."+subjects.SlotsBucket+"."+kvToken(subjects.LimitScopeTenant)+"."+kvToken("globex")+".0", "x", "y")
	// A call of acme's through the same subscription: the requests above were handled before.
	if res, err := (Client{NC: acme}).Call(ctx, "acme", subjects.CallRequest{ID: "a-1", Tool: "fixture__echo",
		Arguments: []byte(`{"text":"acme"}`)}); err != nil || res.Status != subjects.CallOK {
		t.Fatalf("acme's own call: %+v %v", res, err)
	}

	// Nothing ran as globex.
	calls, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := calls.GetLastMsgForSubject(ctx, subjects.Calls("globex")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		if m != nil {
			t.Errorf("a message on globex's calls subject: %.80s", m.Data)
		} else {
			t.Errorf("look up globex's calls subject: %v", err)
		}
	}
	if res, ok, err := getResult(ctx, r.ex.st.results, "globex", "evil-1"); ok || err != nil {
		t.Errorf("globex has an answer of call evil-1 it never made: %+v %v", res, err)
	}
	// globex's own call gets its own answer, and its concurrency slot is free.
	res := r.call("globex", "fixture__echo", `{"text":"globex"}`, func(q *subjects.CallRequest) { q.ID = "g-1" })
	if res.Status != subjects.CallOK || res.Tenant != "globex" || res.Duplicate {
		t.Errorf("globex's call g-1: %s tenant %q duplicate %v %+v; want its own ok answer", res.Status, res.Tenant, res.Duplicate, res.Error)
	}
	res = r.call("globex", "fixture__echo", `{"text":"globex"}`)
	if res.Status != subjects.CallOK {
		t.Errorf("globex's call: %s %+v; want ok (its slot free)", res.Status, res.Error)
	}
}
