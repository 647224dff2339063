package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// restartNATS stops the rig's JetStream server and starts it again on the same port with its
// store, as an operator restarting nats-server does; the rig's connections reconnect.
func (r *rig) restartNATS() {
	r.t.Helper()
	restartServer(r.t, r.env)
}

// startNATS is natstest.StartWith, and shuts down at cleanup whichever server env.Server is
// then (restartServer replaces it), at the point of the cleanups where the first one was
// started: after everything started later (executors, managers) has stopped. A restarted
// server's own cleanup would run first, and each executor then stopped against no server: its
// consumers never drained, and it waited out StopGrace (10 s).
func startNATS(t testing.TB, cfg natsembed.Config) *natstest.Env {
	t.Helper()
	env := natstest.StartWith(t, cfg)
	t.Cleanup(func() { env.Server.Shutdown() })
	return env
}

// restartServer restarts env's server on the same port with its store (memory storage is lost).
// env must come from startNATS, whose cleanup shuts the new server down.
func restartServer(t testing.TB, env *natstest.Env) {
	t.Helper()
	env.Server.Shutdown()
	listen := strings.TrimPrefix(env.URL, "nats://")
	var err error
	for range 50 { // the port may take a moment to be free again
		var srv *natsembed.Server
		if srv, err = natsembed.Start(natsembed.Config{StoreDir: env.Dir, Listen: listen}); err == nil {
			env.Server = srv
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("restart nats: %v", err)
}

// TestLimitsAfterNATSRestart: a NATS server restarted with its store keeps the streams, and the
// executor serves on once reconnected. Its rate counters and concurrency slots live in memory
// storage, which a restarted server does not keep: every call of a limited tool was refused
// unavailable ("limits cannot be checked") until the executor process was restarted, and no
// stream check noticed.
func TestLimitsAfterNATSRestart(t *testing.T) {
	for name, limits := range map[string]Limits{
		"rates and caps": {Servers: map[string]Rate{"*": {PerSecond: 1000, Burst: 1000, Concurrency: 4}}},
		// The slots are read before they are taken: a read of a bucket that is gone finds no
		// responders, which must declare it again too.
		"caps alone": {Servers: map[string]Rate{"*": {Concurrency: 4}}},
	} {
		t.Run(name, func(t *testing.T) { limitsAfterNATSRestart(t, limits) })
	}
}

func limitsAfterNATSRestart(t *testing.T, limits Limits) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Limits: limits}})
	if res := r.call("local", "fixture__echo", `{"text":"before"}`); res.Status != subjects.CallOK {
		t.Fatalf("before the restart: %s %+v", res.Status, res.Error)
	}

	r.restartNATS()
	waitFor(t, "reconnected", r.env.NC.IsConnected)
	var res subjects.CallResult
	deadline := time.Now().Add(waitLimit)
	for i := 0; time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		res, err = r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__echo", Arguments: []byte(`{"text":"after"}`)})
		cancel()
		if err == nil && res.Status == subjects.CallOK {
			return
		}
		if err == nil && res.Error != nil && res.Error.Code != subjects.CodeUnavailable {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("after the restart: %s %+v, want ok", res.Status, res.Error)
}
