package registrysync

import (
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A dispatch handler that panics may have sent tools/call already: its answer is
// outcome_unknown (may have run), never a plain failure a caller would take as "did not run"
// and send again.
func TestDispatchPanicIsOutcomeUnknown(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "fx", "fixture")))
	waitUntil(t, "endpoints up", h.m.Ready)
	boom := func(string) { panic("boom after the call was sent") }
	h.m.beforeDispatch.Store(&boom)
	r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "c1", Tool: "echo"})
	if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %+v, want outcome_unknown", r.Error)
	}
	// The manager still serves.
	h.m.beforeDispatch.Store(nil)
	if r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "c2", Tool: "echo", Arguments: []byte(`{"text":"hi"}`)}); r.Error != nil {
		t.Errorf("after the panic: %+v, want a result", r.Error)
	}
}
