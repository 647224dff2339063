package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// cutErrorDispatcher answers every call with a protocol error whose message quotes a server's
// words cut to size before the executor redacts them ("…" where the connector cut them), the
// cut in the middle of secret.
type cutErrorDispatcher struct{ secret string }

func (d cutErrorDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	return subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeProtocolError,
		Message: "server answered JSON-RPC error -32000: token " + d.secret[:14] + "…"}}
}

// TestDispatchErrorCutSecretRedacted: the executor redacts its configured secrets from a
// dispatch error's message before it answers (the connector may have other secrets, or none);
// the audit's copy of the message had the start of a secret cut by the connector redacted
// (StringCut), the call's answer (CallResult, kept in the results stream) did not.
func TestDispatchErrorCutSecretRedacted(t *testing.T) {
	const secret = "sk-live-DispatchCut0123456789"
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}, Dispatcher: cutErrorDispatcher{secret}}})
	res := r.call("local", "fixture__echo", `{"text":"x"}`)
	if res.Error == nil || res.Error.Code != subjects.CodeProtocolError {
		t.Fatalf("got %s %+v, want a protocol_error", res.Status, res.Error)
	}
	if strings.Contains(res.Error.Message, secret[:10]) || !strings.Contains(res.Error.Message, "token [redacted]…") {
		t.Errorf("the answer holds the start of the secret, or not it redacted: %q", res.Error.Message)
	}
}

// TestRefusalCutSecretRedacted: a refusal's message (kept in the results stream with the
// call's answer) quotes words cut to size (a member name at 200 bytes): the audit's copy had
// the start of a secret straddling the cut redacted, the answer's did not.
func TestRefusalCutSecretRedacted(t *testing.T) {
	const secret = "sk-live-RefusalCut0123456789"
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}})
	key := strings.Repeat("k", 184) + secret // cut at byte 200 of "/" + key
	res := r.call("local", "fixture__echo", `{"text":"x",`+string(mustJSON(t, key))+`:1,`+string(mustJSON(t, key))+`:2}`)
	if res.Error == nil || res.Status == subjects.CallOK {
		t.Fatalf("got %s, want the duplicate member refused", res.Status)
	}
	if strings.Contains(res.Error.Message, secret[:12]) || !strings.Contains(res.Error.Message, "[redacted]…") {
		t.Errorf("the refusal holds the start of the secret, or not it redacted: %q", res.Error.Message)
	}
}
