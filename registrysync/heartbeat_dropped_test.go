package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A connector_lost declaration that the NATS client drops (its status subscription over its
// pending limits: a burst of statuses while the handler waits) is still reclaimed. The
// subscription was read live only, the stream again only after a reconnection: the server
// stayed declared lost (search no longer offered its tools) while this process ran it. Not
// parallel: it sends 70 MiB through NATS.
func TestDeclarationDroppedBySlowConsumerReclaimed(t *testing.T) {
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "svc", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryStatus("svc"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	pub := h.env.Connect(t)

	// The status handler waits on the manager's lock (another process's connector_stopped
	// status is checked against whether this one runs), while a burst fills its pending bytes
	// (nats.go's default limit, 64 MiB) to within a few bytes, and the declaration comes.
	h.m.mu.Lock()
	locked := true
	defer func() {
		if locked {
			h.m.mu.Unlock()
		}
	}()
	other, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "other",
		Status: subjects.StatusUnavailable, Code: subjects.CodeConnectorStopped, Connector: "someone-else", At: time.Now().UTC()})
	if err := pub.Publish(subjects.RegistryStatus("other"), other); err != nil {
		t.Fatal(err)
	}
	for size := 7 << 20; size >= 16; size /= 2 {
		n := 1
		if size == 7<<20 {
			n = 10 // 70 MiB: past the limit
		}
		for range n {
			if err := pub.Publish(subjects.RegistryStatus("junk"), bytes.Repeat([]byte{'x'}, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	st := *ready.ev.Status
	st.Status, st.Code, st.Reason, st.HeartbeatMs = subjects.StatusUnavailable, subjects.CodeConnectorLost, "watchdog", 0
	data, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := h.env.JS.Publish(ctx, subjects.RegistryStatus("svc"), data); err != nil {
		t.Fatal(err)
	}
	// The manager's connection has read everything above (or dropped it) once this round trip
	// is done.
	if err := h.env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	h.m.mu.Unlock()
	locked = false
	lost := rec.wait(ready.seq, "declared", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorLost))
	rec.wait(lost.seq, "reclaimed", isStatus(subjects.StatusReady, ""))
}
