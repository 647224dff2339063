package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// loudFailure answers every dispatch with a protocol error of 1 MiB of text, as a hostile
// server's JSON-RPC error (or a connector that passes it on) could.
type loudFailure struct{}

func (loudFailure) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	return subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeProtocolError,
		Message: "server answered JSON-RPC error -32000: " + strings.Repeat("spam ", 200<<10), Reason: strings.Repeat("why ", 256<<10)}}
}

// The text of a dispatch error is cut to maxDispatchErrorBytes: megabytes from a server do not
// reach the result and the audit stream.
func TestDispatchErrorTextCapped(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.startExecutor(Config{Dispatcher: loudFailure{}, Relister: r.mgr}, r.env.NC)
	r.waitTool("fixture__echo")
	res := r.call("local", "fixture__echo", `{"text":"x"}`)
	if res.Error == nil || res.Error.Code != subjects.CodeProtocolError {
		t.Fatalf("got %s %+v, want protocol_error", res.Status, res.Error)
	}
	if n := len(res.Error.Message) + len(res.Error.Reason); n > 2*maxDispatchErrorBytes+8 {
		t.Errorf("the error holds %d bytes of text", n)
	}
	if !strings.HasPrefix(res.Error.Message, "server answered JSON-RPC error -32000: spam") {
		t.Errorf("message %.80q…: want its beginning kept", res.Error.Message)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "audit events", func() bool { evs = r.auditEvents("local", res.ID); return hasResultEvent(evs) })
	all, _ := json.Marshal(evs)
	if len(all) > 64<<10 {
		t.Errorf("the call's audit events hold %d bytes", len(all))
	}
}
