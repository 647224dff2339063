package liveness

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Junk published on a status subject after the last status moves the subject's sequence: the
// declaration must still land (it expects the junk's sequence), and a heartbeatMs too large for
// a time.Duration is not taken as a tiny one.
func TestWatchdogHostileStatuses(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	// Started after these messages, it would read only the last of each subject (the junk).
	waitFor(t, "the watchdog reading statuses", w.Ready)
	pub := func(server string, data []byte) {
		t.Helper()
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	status := func(server string, ms int64) []byte {
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: "gone", HeartbeatMs: ms, At: time.Now()})
		return data
	}
	pub("huge", status("huge", math.MaxInt64))
	// A period long enough for the junk to be stored before the declaration is due.
	pub("junked", status("junked", 500))
	pub("junked", []byte(`{"v":1,"type":"status","server":"another"}`))
	pub("junked", []byte(`not json`))
	waitFor(t, "the junked server declared", func() bool { return last(statuses(t, env, "junked")).Code == subjects.CodeConnectorLost })
	if st := last(statuses(t, env, "huge")); st.Code != "" {
		t.Errorf("a huge heartbeatMs was declared at once: %+v", st)
	}
	if w.Declared() != 1 {
		t.Errorf("declared %d, want 1", w.Declared())
	}
}
