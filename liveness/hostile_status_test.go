package liveness

import (
	"encoding/json"
	"fmt"
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

// Heartbeats of connectors no status names (made-up ids, published by anyone allowed on the
// heartbeat subjects) are not kept: the watchdog's memory stays bounded by the servers it
// watches.
func TestWatchdogIgnoresUnknownHeartbeats(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "s", Status: subjects.StatusReady,
		Connector: "known", HeartbeatMs: time.Hour.Milliseconds(), At: time.Now()})
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("s"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the status seen", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.servers["s"] != nil
	})
	beat := func(id string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Heartbeat{V: 1, Type: subjects.EventHeartbeat, Connector: id, EveryMs: 1000, At: time.Now()})
		if err := env.NC.Publish(subjects.HeartbeatSubject(id), data); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 {
		beat(fmt.Sprintf("made-up-%d", i))
	}
	beat("known") // after the others on one connection: once it is seen, they all were
	waitFor(t, "the known connector's heartbeat", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.beats["known"]
		return ok
	})
	w.mu.Lock()
	n := len(w.beats)
	w.mu.Unlock()
	if n != 1 {
		t.Errorf("the watchdog keeps the heartbeats of %d connectors, want only the one a status names", n)
	}
}
