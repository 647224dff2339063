package registrysync

import (
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestDispatchNotSentFlag: a call refused before it left the connector (its server not
// connected) carries DispatchReply.NotSent, which the executor reads to give the call's rate
// counts back; the words "nothing was sent" in the message were all it had, and a server's own
// words quoted in another refusal could say them too.
func TestDispatchNotSentFlag(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "missing", "fixture", "PATH="+t.TempDir())
	sc.Command = "mcpstream-test-no-such-command"
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("missing"))
	rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	r := dispatch(t, h, "missing", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{}`)})
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || !r.NotSent {
		t.Errorf("a call to a server not connected: error %+v, notSent %v; want unavailable and notSent", r.Error, r.NotSent)
	}
}
