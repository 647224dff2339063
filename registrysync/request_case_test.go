package registrysync

import (
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestServerRequestFloodCaseBounded: the requests a stdio server sends are answered on the
// reader's goroutine (TestServerRequestFloodBounded), but only those spelling "method" and "id"
// in lower case were recognized. mcp-go's transport decodes member names case-insensitively,
// so a flood of {"ID":..,"Method":"ping"} still reached it, and it answered each on a goroutine
// of its own, all blocked on the stalled stdin.
func TestServerRequestFloodCaseBounded(t *testing.T) {
	cfg := fastConfig(rawServer(t, "rfc", "reqfloodcase"))
	cfg.ListTimeout = 60 * time.Second
	run(t, nil, cfg)
	base := runtime.NumGoroutine()
	time.Sleep(2 * time.Second)
	if n := runtime.NumGoroutine(); n > base+500 {
		t.Errorf("%d goroutines (%d before) after 2s of a server flooding requests spelled ID/Method", n, base)
	}
}

// TestSSERequestsFilterMemberCase: the SSE filter took out only the requests spelling "method"
// in lower case; mcp-go's SSE transport, which decodes member names case-insensitively and
// unescaped, took the others for responses (see sseRequests).
func TestSSERequestsFilterMemberCase(t *testing.T) {
	in := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"ID\":7,\"Method\":\"ping\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":8,\"\\u006dethod\":\"roots/list\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"d\":\"a \\\"quoted\\\" text\"}}\n\n"
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"d\":\"a \\\"quoted\\\" text\"}}\n\n"
	var got []string
	f := &sseRequests{src: io.NopCloser(strings.NewReader(in)), answer: func(id json.RawMessage, method string) {
		got = append(got, string(id)+" "+method)
	}}
	out, err := io.ReadAll(f)
	if err != nil || string(out) != want {
		t.Errorf("%v\n%q\nwant\n%q", err, out, want)
	}
	if strings.Join(got, ",") != `7 ping,8 roots/list` {
		t.Errorf("answered %v, want both requests", got)
	}
}

func TestMayHoldMember(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`{"id":1,"method":"ping"}`, true},
		{`{"ID":1,"METHOD":"ping"}`, true},
		{`{"id":1,"\u006dethod":"ping"}`, true},
		{`{"id":1,"result":{"methods":"x","method ":"y"}}`, false},
		{`{"id":1,"result":{}}`, false},
		{`"method`, false},
		{`{"method"`, true},
	} {
		if got := mayHoldMember([]byte(c.msg), "method"); got != c.want {
			t.Errorf("mayHoldMember(%s) = %v, want %v", c.msg, got, c.want)
		}
	}
}
