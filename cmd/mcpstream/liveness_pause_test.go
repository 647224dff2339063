package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// An indexer replica that was paused (SIGSTOP, a frozen VM) while a registrysync kept beating
// finds the heartbeats of the pause still unread when it resumes: its watchdog must not declare
// that live registrysync lost (connector_lost) before it has read them.
func TestPausedIndexerDeclaresNoLiveConnector(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	status := func(server, connector string) {
		t.Helper()
		data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server,
			Status: subjects.StatusReady, Connector: connector, HeartbeatMs: 1000, At: time.Now().UTC()})
		if _, err := env.JS.Publish(ctx, subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	// "live" runs in a registrysync that beats (more often than it says: no false alarm from a
	// slow test process); "dead" in one that never does, which tells the watchdog runs.
	status("live", "beating")
	status("dead", "silent")
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			data, _ := json.Marshal(subjects.Heartbeat{V: subjects.Version, Type: subjects.EventHeartbeat,
				Connector: "beating", EveryMs: 1000, At: time.Now().UTC()})
			env.NC.Publish(subjects.HeartbeatSubject("beating"), data)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	cmd := exec.Command(os.Args[0], "indexer", "--nats", env.URL, "--data", t.TempDir())
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	last := func(server string) subjects.Status {
		t.Helper()
		msg, err := env.JS.Stream(ctx, subjects.RegistryStream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := msg.GetLastMsgForSubject(ctx, subjects.RegistryStatus(server))
		if err != nil {
			t.Fatal(err)
		}
		var st subjects.Status
		json.Unmarshal(m.Data, &st)
		return st
	}
	waitFor(t, "the silent connector declared lost", 600, func() bool { return last("dead").Code == subjects.CodeConnectorLost })

	// Each pause leaves the replica's heartbeats to read, a burst of another registrysync's
	// first: several pauses, as the replica may read them before its next check.
	for range 2 {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		data, _ := json.Marshal(subjects.Heartbeat{V: subjects.Version, Type: subjects.EventHeartbeat,
			Connector: "another", EveryMs: 1000, At: time.Now().UTC()})
		for range 2000 {
			env.NC.Publish(subjects.HeartbeatSubject("another"), data)
		}
		time.Sleep(4 * time.Second) // over 3 heartbeat periods in all
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if st := last("live"); st.Status != subjects.StatusReady {
			t.Fatalf("a registrysync that never stopped beating was declared %s (%s) by a replica resuming from a pause: %s", st.Status, st.Code, st.Reason)
		}
	}
}
