package registrysync

import (
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRelistAndDispatchRefuseOtherVersions: every request payload carries "v": 1, and one of
// another version is bad_request (README, NATS API), as the executor and the catalog service
// answer. The relist and dispatch endpoints read "v":2 as a v1 request: a DispatchRequest of
// another version ran tools/call.
func TestRelistAndDispatchRefuseOtherVersions(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, newFixture(fixtureOptions{})), Kinds: []string{"tools"}}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	args := json.RawMessage(`{"text":"hi"}`)
	if r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 2, CallID: "c-v2", Tool: "echo", Arguments: args}); r.Error == nil || r.Error.Code != subjects.CodeBadRequest || r.Result != nil {
		t.Errorf("dispatch of version 2: %+v %s, want bad_request and nothing run", r.Error, r.Result)
	}
	if r := relist(t, h, "fx", subjects.RelistRequest{V: 2, Kind: subjects.KindTools}); r.Error == nil || r.Error.Code != subjects.CodeBadRequest {
		t.Errorf("relist of version 2: %+v, want bad_request", r.Error)
	}
	// Version 1, and a request without "v" (read as version 1), are served.
	for _, v := range []int{subjects.Version, 0} {
		if r := dispatch(t, h, "fx", subjects.DispatchRequest{V: v, CallID: "c-v1", Tool: "echo", Arguments: args}); r.Error != nil || r.Result == nil {
			t.Errorf("dispatch of version %d: %+v, want a result", v, r.Error)
		}
		if r := relist(t, h, "fx", subjects.RelistRequest{V: v, Kind: subjects.KindTools}); r.Error != nil {
			t.Errorf("relist of version %d: %+v", v, r.Error)
		}
	}
}
