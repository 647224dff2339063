package executor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A call whose dispatch is retried (a failure before sending, retried for any tool) is not
// dispatched again once its tool is revoked: a revoked tool never executes, retry or not.
func TestRetryAfterRevocationNotDispatched(t *testing.T) {
	disp := &hookDispatcher{} // its first dispatch revokes the tool, then answers unavailable
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: disp}})
	disp.first = func() {
		r.publishRegistry(subjects.RegistryRevoked("vault"), subjects.Revocation{V: 1, Type: subjects.EventRevoked,
			Server: "vault", Tools: []string{"move"}, Reason: "incident"})
		waitFor(t, "revoked in the executor's view", func() bool {
			return r.ex.reg.view.Tool("vault", "move").State == staleness.Revoked
		})
	}
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}})
	r.waitTool("vault__move")

	res := r.call("local", "vault__move", `{}`)
	n := disp.dispatches()
	if n != 1 || res.Status == subjects.CallOK {
		t.Errorf("dispatched %d times, answer %s %+v: want one dispatch and no ok after the revocation", n, res.Status, res.Error)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeStale || res.Status != subjects.CallRefused {
		t.Errorf("answer %s %+v, want refused stale (nothing ran)", res.Status, res.Error)
	}
}
