package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestReplyToHeader: a call published on the calls stream with an inbox in Mcpstream-Reply-To
// gets its answer there (and on the results stream); a reply subject outside the reply prefixes
// is ignored — the worker never publishes on it.
func TestReplyToHeader(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"kb"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	inbox := nats.NewInbox()
	got := make(chan *nats.Msg, 4)
	sub, err := r.env.NC.ChanSubscribe(inbox, got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// A subject a hostile caller might name to make the worker publish into the registry.
	hostile := subjects.RegistryStatus("kb")
	hostileMsgs := make(chan *nats.Msg, 4)
	hsub, err := r.env.NC.ChanSubscribe(hostile, hostileMsgs)
	if err != nil {
		t.Fatal(err)
	}
	defer hsub.Unsubscribe()

	publish := func(id, replyTo string) {
		t.Helper()
		req := subjects.CallRequest{V: 1, ID: id, Tool: "kb__get_document", Arguments: json.RawMessage(`{"id":"POL-TRAVEL"}`),
			Principal: subjects.Principal{User: "local"}}
		data, _ := json.Marshal(req)
		m := &nats.Msg{Subject: subjects.Calls("local"), Data: data, Header: nats.Header{}}
		m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID("local", id))
		m.Header.Set(subjects.HeaderReplyTo, replyTo)
		if _, err := r.env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	publish("direct-1", inbox)
	select {
	case m := <-got:
		var res subjects.CallResult
		if err := json.Unmarshal(m.Data, &res); err != nil {
			t.Fatalf("answer on the inbox is not a CallResult: %v: %s", err, m.Data)
		}
		if res.ID != "direct-1" || res.Status != subjects.CallOK {
			t.Errorf("got %+v, want call direct-1 ok", res)
		}
		// Stored before it was sent.
		stored, err := r.client.Await(ctx, "local", "direct-1")
		if err != nil || stored.Status != subjects.CallOK {
			t.Errorf("results stream: got %+v, %v; want the same answer", stored, err)
		}
	case <-ctx.Done():
		t.Fatal("no answer on the reply inbox")
	}

	publish("direct-2", hostile)
	res, err := r.client.Await(ctx, "local", "direct-2")
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("got %+v, %v; want the answer on the results stream", res, err)
	}
	// The answer was stored before any reply would go out: nothing came on the hostile subject.
	r.env.NC.Flush()
	select {
	case m := <-hostileMsgs:
		t.Errorf("the worker published on %s: %s", hostile, m.Data)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestFrontEndRelaysForCustomInbox: a caller whose reply subject is not under the reply
// prefixes (a custom inbox prefix) is answered by the front end, which waits for the stored
// answer and relays it; a resend of the id gets the same answer marked duplicate.
func TestFrontEndRelaysForCustomInbox(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"kb"}})
	nc, err := nats.Connect(r.env.NC.ConnectedUrl(), nats.CustomInboxPrefix("_CUSTOM.inbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := Client{NC: nc}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "custom-1", Tool: "kb__get_document", Arguments: json.RawMessage(`{"id":"POL-TRAVEL"}`),
		Principal: subjects.Principal{User: "local"}}
	first, err := c.Call(ctx, "local", req)
	if err != nil || first.Status != subjects.CallOK || first.Duplicate {
		t.Fatalf("got %+v, %v; want ok", first, err)
	}
	again, err := r.client.Call(ctx, "local", req)
	if err != nil || again.Status != subjects.CallOK || !again.Duplicate {
		t.Fatalf("resend: got %+v, %v; want ok, duplicate", again, err)
	}
}

func TestValidReply(t *testing.T) {
	e := &Executor{cfg: Config{}.withDefaults()}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"_INBOX.abc.1", true},
		{"_INBOX.", false},
		{"_INBOX.a.>", false},
		{"_INBOX.*.x", false},
		{"_INBOX.a b", false},
		{"_INBOX.a..b", false},
		{"_INBOX.a.", false},
		{"mcpstream.v1.registry.kb.status", false},
		{"", false},
		{"_INBOX." + string(make([]byte, 600)), false},
	} {
		if got := e.validReply(tc.in) != ""; got != tc.want {
			t.Errorf("validReply(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// A prefix configured too broadly still never names mcpstream's own subjects or the server's.
	broad := &Executor{cfg: Config{ReplyPrefixes: []string{"mcp", "$", "_INBOX."}}.withDefaults()}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"mcpx.reply.1", true},
		{"_INBOX.abc.1", true},
		{"mcpstream.v1.calls.other", false},
		{"mcpstream.v1.results.other.id", false},
		{"$KV.mcpstream-slots.x", false},
	} {
		if got := broad.validReply(tc.in) != ""; got != tc.want {
			t.Errorf("broad prefixes: validReply(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestCallDirect: a call persisted straight on the calls stream is answered on the caller's
// inbox; a refusal too; a resend of the id gets the stored answer marked duplicate; an inbox the
// workers do not answer still gets the answer (from the results stream); a request JetStream
// does not store is refused unavailable.
func TestCallDirect(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigOptions{servers: []string{"kb"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := subjects.CallRequest{ID: "cd-1", Tool: "kb__get_document", Arguments: json.RawMessage(`{"id":"POL-TRAVEL"}`),
		Principal: subjects.Principal{User: "local"}}
	first, err := r.client.CallDirect(ctx, "local", req)
	if err != nil || first.Status != subjects.CallOK || first.Duplicate || len(first.Result) == 0 {
		t.Fatalf("got %+v, %v; want ok with a result", first, err)
	}
	if viaFrontEnd := r.call("local", "kb__get_document", `{"id":"POL-TRAVEL"}`); string(viaFrontEnd.Result) != string(first.Result) {
		t.Errorf("direct result %s differs from the front end's %s", first.Result, viaFrontEnd.Result)
	}
	again, err := r.client.CallDirect(ctx, "local", req)
	if err != nil || again.Status != subjects.CallOK || !again.Duplicate || string(again.Result) != string(first.Result) {
		t.Fatalf("resend: got %+v, %v; want the same answer, duplicate", again, err)
	}
	missing, err := r.client.CallDirect(ctx, "local", subjects.CallRequest{Tool: "kb__nope", Principal: subjects.Principal{User: "local"}})
	if err != nil || missing.Status != subjects.CallRefused || missing.Error == nil || missing.Error.Code != subjects.CodeNotFound {
		t.Fatalf("got %+v, %v; want refused not_found", missing, err)
	}

	// An inbox outside the workers' reply prefixes: never published to, the answer still comes.
	nc, err := nats.Connect(r.env.NC.ConnectedUrl(), nats.CustomInboxPrefix("_CUSTOM.inbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	custom := Client{NC: nc, JS: r.env.JS}
	res, err := custom.CallDirect(ctx, "local", subjects.CallRequest{Tool: "kb__get_document", Arguments: json.RawMessage(`{"id":"POL-TRAVEL"}`),
		Principal: subjects.Principal{User: "local"}})
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("custom inbox: got %+v, %v; want ok", res, err)
	}

	// Counted: the calls above (a resend is not run again), the refusal among them.
	if st := r.ex.Stats(); st.Answered != 4 || st.Refused != 1 || st.Failed != 0 || st.Seconds <= 0 || st.Handled < 4 {
		t.Errorf("stats %+v, want 4 answers, 1 refused, 0 failed and some time", st)
	}
	if err := r.env.JS.DeleteStream(ctx, subjects.CallsStream); err != nil {
		t.Fatal(err)
	}
	lost, err := r.client.CallDirect(ctx, "local", req)
	if err != nil || lost.Status != subjects.CallRefused || lost.Error == nil || lost.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("without the calls stream: got %+v, %v; want refused unavailable", lost, err)
	}
	if _, err := (Client{NC: r.env.NC}).CallDirect(ctx, "local", req); err == nil {
		t.Error("CallDirect without JS: got no error")
	}
}
