package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// rawResults answers every dispatch with the result its arguments' "mode" names.
type rawResults map[string]string

func (m rawResults) Dispatch(_ context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	var args struct{ Text string }
	_ = json.Unmarshal(req.Arguments, &args)
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(m[args.Text])}
}

// A server's result with bytes that are not UTF-8 (a lone surrogate's UTF-8 form among them)
// is the call's answer as the server sent it, but its audit result event is UTF-8: JSON text
// (RFC 8259 §8.1) that a strict reader of the audit stream (Python's json.loads of the bytes,
// say) can read. A small result that held nothing to redact was spliced into the event as
// it came, invalid bytes and all; the same result holding a secret came out UTF-8, U+FFFD in
// their place.
func TestResultInvalidUTF8AuditIsUTF8(t *testing.T) {
	results := rawResults{
		"bad":   "{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\xed\xa0\x80c\"}]}",
		"name":  "{\"content\":[],\"\xfe\":1}",
		"lone":  `{"content":[{"type":"text","text":"a\ud800b"}]}`,
		"plain": `{"content":[{"type":"text","text":"héllo"}]}`,
	}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: results}})
	for mode, raw := range results {
		res := r.call("local", "fixture__echo", `{"text":"`+mode+`"}`, func(c *subjects.CallRequest) { c.ID = "utf8-" + mode })
		if res.Status != subjects.CallOK || res.Error != nil {
			t.Errorf("%s: got %s %+v, want ok", mode, res.Status, res.Error)
			continue
		}
		if !bytes.Equal(res.Result, []byte(raw)) {
			t.Errorf("%s: answer's result %q, want the server's %q", mode, res.Result, raw)
		}
		var data []byte
		waitFor(t, mode+"'s audit result event", func() bool { data = rawResultEvent(t, r, "utf8-"+mode); return data != nil })
		if !utf8.Valid(data) {
			t.Errorf("%s: the audit result event is not UTF-8: %q", mode, data)
		}
		var ev subjects.AuditEvent
		if err := json.Unmarshal(data, &ev); err != nil || !strings.Contains(string(ev.Result), `"content"`) {
			t.Errorf("%s: audit result event %q (%v), want the result in it", mode, data, err)
		}
	}
}

// rawResultEvent is the bytes of call id's audit result event (tenant local), nil if none yet.
func rawResultEvent(t *testing.T, r *rig, id string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, subjects.Audit("local", subjects.AuditResult))
	if err != nil {
		return nil
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= m.Sequence && seq > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil || msg.Subject != subjects.Audit("local", subjects.AuditResult) {
			continue
		}
		var ev subjects.AuditEvent
		if json.Unmarshal(msg.Data, &ev) == nil && ev.CallID == id {
			return msg.Data
		}
	}
	return nil
}

// A result that is not a JSON object is failed protocol_error, and, as every other answer of
// a call whose server answered, it says the call ran: a caller must not take it for a call
// that can be sent again.
func TestResultNotObjectSaysItRan(t *testing.T) {
	results := rawResults{"array": `[{"type":"text","text":"a"}]`, "string": `"done"`, "null": `null`}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: results}})
	for mode := range results {
		res := r.call("local", "fixture__echo", `{"text":"`+mode+`"}`)
		if res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeProtocolError ||
			!strings.Contains(res.Error.Message, "the call ran") || len(res.Result) != 0 {
			t.Errorf("%s: got %s %+v %s, want failed protocol_error saying the call ran", mode, res.Status, res.Error, res.Result)
		}
	}
}
