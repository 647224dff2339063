package registrysync

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestStdioBrokenAnswerEndsCall: a stdio server answering tools/call with a line that is not
// valid JSON (a NaN in its result, as Python's json.dumps writes it; a line cut short; a
// JSON-RPC batch refused) had its answer dropped as malformed: the call waited out its whole
// timeout and reported timeout, though it ran and the server answered. It ends now with
// protocol_error, saying the answer was not valid JSON. (The calls' timeout is a minute: a
// protocol_error can only come from the answer.)
func TestStdioBrokenAnswerEndsCall(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rawServer(t, "bk", "broken")))
	rec := record(t, h.env, subjects.RegistryServer("bk"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	for _, tc := range []struct{ r, want string }{
		{"nan", "is not valid JSON: invalid character 'N'"},
		{"nanlast", "is not valid JSON: invalid character 'N'"},
		{"cut", "is not valid JSON: it is cut short"},
		{"batch", "batch"},
	} {
		r := h.m.Dispatch(context.Background(), "bk", subjects.DispatchRequest{V: 1, Tool: "t",
			Arguments: []byte(`{"r":"` + tc.r + `"}`), TimeoutMs: 60000})
		if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, tc.want) {
			t.Errorf("%s: got %+v %s, want %s naming %q", tc.r, r.Error, r.Result, subjects.CodeProtocolError, tc.want)
			continue
		}
		if tc.r != "batch" && !strings.Contains(r.Error.Message, `tools/call "t"`) {
			t.Errorf("%s: %q does not name the call", tc.r, r.Error.Message)
		}
	}
	// The session goes on.
	if r := h.m.Dispatch(context.Background(), "bk", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 60000}); r.Error != nil || !strings.Contains(string(r.Result), "ok") {
		t.Fatalf("call after the broken answers: %+v %s", r.Error, r.Result)
	}
}

// TestStdioBrokenLineOfOthersFailsNothing: broken lines that answer no waiting call — another
// call's id, one that only starts with the call's, the call's id spelt with an escape, a
// request carrying the call's id, no id, a number, a refused batch for another id — fail
// nothing: the call gets the valid answer that follows them, and the next call works.
func TestStdioBrokenLineOfOthersFailsNothing(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rawServer(t, "bo", "broken")))
	rec := record(t, h.env, subjects.RegistryServer("bo"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := h.m.Dispatch(context.Background(), "bo", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: []byte(`{"r":"others"}`), TimeoutMs: 60000})
	if r.Error != nil || !strings.Contains(string(r.Result), "ok") {
		t.Fatalf("call answered after broken lines of others: %+v %s, want its own answer", r.Error, r.Result)
	}
	if r := h.m.Dispatch(context.Background(), "bo", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 60000}); r.Error != nil || !strings.Contains(string(r.Result), "ok") {
		t.Fatalf("next call: %+v %s", r.Error, r.Result)
	}
}

// TestStdioBrokenAnswerRedacted: the sample of a broken answer quoted in the call's error (and
// the log) has the server's token redacted, also where the line spells it with JSON escapes.
func TestStdioBrokenAnswerRedacted(t *testing.T) {
	t.Parallel()
	const secret = "p&ss-Secret-9"
	h, logs := runLogged(t, fastConfig(stdioServer(t, "bs", "raw:broken", "SERVICE_TOKEN="+secret)))
	rec := record(t, h.env, subjects.RegistryServer("bs"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := h.m.Dispatch(context.Background(), "bs", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: []byte(`{"r":"nansecret"}`), TimeoutMs: 60000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "not valid JSON") {
		t.Fatalf("got %+v %s, want protocol_error: not valid JSON", r.Error, r.Result)
	}
	if strings.Contains(r.Error.Message, "ss-Secret-9") || strings.Contains(r.Error.Message, `\u0026ss`) {
		t.Errorf("the error holds the secret: %s", r.Error.Message)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ss-Secret-9") {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}

// TestFastRouterBrokenAnswer: only a broken answer whose id is exactly a waiting call's ends it.
func TestFastRouterBrokenAnswer(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":"mcpstream-1","result":{"v":NaN}}`, true},
		{`{"result":{"v":NaN},"jsonrpc":"2.0","id":"mcpstream-1"}`, true},
		{`{"jsonrpc":"2.0","id":"mcpstream-1","result":{"v":"x`, true},
		{`{"jsonrpc":"2.0","id":"mcpstream-10","result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","id":"mcpstream-","result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","id":"\u006dcpstream-1","result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","id":"mcpstream-1","method":"x","result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"v":NaN}}`, false},
		{`{"jsonrpc":"2.0","id":null,"result":{"v":NaN}}`, false},
		{`{"result":{"v":NaN},"id":"mcpstream-1" ,"jsonrpc":"2.0"`, false},
		{`{`, false},
		{`["mcpstream-1"`, false},
	} {
		c := &child{red: newRedactor(ServerConfig{}), onMalformed: func(string, bool) {}}
		ch := c.fast.register("mcpstream-1")
		got := c.brokenAnswer([]byte(tc.line))
		if got != tc.want {
			t.Errorf("brokenAnswer(%q) = %v, want %v", tc.line, got, tc.want)
			continue
		}
		if got {
			if r := <-ch; r.malformed == "" {
				t.Errorf("%q: the waiting call got %+v", tc.line, r)
			}
		} else if c.fast.n.Load() != 1 {
			t.Errorf("%q: the waiting call was taken", tc.line)
		}
	}
}

// TestRefusedBatchFailsItsCalls: a refused batch ends the calls waiting for the answers in its
// first maxBatch elements, and no other.
func TestRefusedBatchFailsItsCalls(t *testing.T) {
	c := &child{}
	a, b, other := c.fast.register("mcpstream-1"), c.fast.register("mcpstream-2"), c.fast.register("mcpstream-3")
	tail := c.fast.register("mcpstream-4")
	msg := `[{"jsonrpc":"2.0","id":"mcpstream-1","result":{}}, 5, {"result":{},"jsonrpc":"2.0","id":"mcpstream-2"},` +
		`{"jsonrpc":"2.0","id":"mcpstream-30","result":{}},"mcpstream-3",{"jsonrpc":"2.0","id":"mcpstream-3","method":"x"},` +
		strings.Repeat(`{},`, maxBatch) + `{"jsonrpc":"2.0","id":"mcpstream-4","result":{}}]`
	c.refusedBatch([]byte(msg))
	for i, ch := range []<-chan fastResponse{a, b} {
		select {
		case r := <-ch:
			if !r.batch {
				t.Errorf("call %d got %+v", i+1, r)
			}
		default:
			t.Errorf("call %d not ended", i+1)
		}
	}
	for i, ch := range []<-chan fastResponse{other, tail} {
		select {
		case r := <-ch:
			t.Errorf("call %d ended: %+v", i+3, r)
		default:
		}
	}
}
