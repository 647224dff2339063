package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A flood of heartbeats of made-up connectors (100,000 distinct ids, from anyone allowed on the
// heartbeat subjects) while a connector beats and another is silent: the watchdog keeps none of
// them, declares the silent one, and not the one that beats.
func TestHeartbeatFloodOfMadeUpConnectors(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	const period = 500 * time.Millisecond // 1.5 s of silence declares: a flood may hold the watchdog's goroutine a while
	beating, stopBeating := context.WithCancel(context.Background())
	var beats sync.WaitGroup
	beatNC := env.Connect(t)
	beats.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			data, _ := json.Marshal(subjects.Heartbeat{V: 1, Type: subjects.EventHeartbeat, Connector: "alive", EveryMs: 20, At: time.Now()})
			_ = beatNC.Publish(subjects.HeartbeatSubject("alive"), data)
			select {
			case <-beating.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() {
		stopBeating()
		beats.Wait()
	})
	publish := func(server, connector string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: period.Milliseconds(), At: time.Now()})
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	publish("served", "alive")
	flood := env.Connect(t)
	data := []byte(`{"v":1,"type":"heartbeat","connector":"x","everyMs":1}`)
	for i := range 100_000 {
		if err := flood.Publish(subjects.HeartbeatSubject(fmt.Sprintf("made-up-%d", i)), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := flood.Flush(); err != nil {
		t.Fatal(err)
	}
	publish("orphan", "ghost")
	waitFor(t, "orphan declared", func() bool { return last(statuses(t, env, "orphan")).Code == subjects.CodeConnectorLost })
	time.Sleep(3 * period)
	if st := last(statuses(t, env, "served")); st.Code == subjects.CodeConnectorLost {
		t.Errorf("the server of a connector that beat all along declared lost during a flood: %+v", st)
	}
	w.mu.Lock()
	n := len(w.beats)
	w.mu.Unlock()
	if n > 1 {
		t.Errorf("the watchdog keeps the heartbeats of %d connectors, want at most the one a status names", n)
	}
}
