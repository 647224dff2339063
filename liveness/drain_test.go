package liveness

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// A registrysync that is stopping cleanly still runs its servers while the calls in flight
// finish (up to DrainTimeout: --stop-timeout less a margin, which may well exceed 3 heartbeat
// periods): it keeps beating meanwhile, and is not declared lost (connector_lost, "killed, or
// cut off from NATS") before it publishes connector_stopped.
func TestDrainingConnectorNotDeclaredLost(t *testing.T) {
	env := natstest.Start(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := server.NewMCPServer("hold", "1.0.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("hold", mcp.WithDescription("Answers once the test releases it.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			once.Do(func() { close(started) })
			select {
			case <-release:
				return mcp.NewToolResultText("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	w := startWatchdog(t, env)

	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := registrysync.New(js, nc, registrysync.Config{
		Servers:        []registrysync.ServerConfig{{Name: "hold", URL: ts.URL + "/mcp"}},
		HeartbeatEvery: beat, ResyncEvery: -1, PingEvery: -1, DrainTimeout: waitLimit,
	}, logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	var releaseOnce sync.Once
	t.Cleanup(func() {
		releaseOnce.Do(func() { close(release) })
		cancel()
		<-done
	})
	waitFor(t, "hold ready with heartbeats", func() bool {
		st := last(statuses(t, env, "hold"))
		return st.Status == subjects.StatusReady && st.HeartbeatMs == beat.Milliseconds()
	})
	waitFor(t, "the watchdog reading statuses", w.Ready)

	replied := make(chan subjects.DispatchReply, 1)
	go func() {
		replied <- m.Dispatch(context.Background(), "hold", subjects.DispatchRequest{V: subjects.Version, CallID: "c1", Tool: "hold", TimeoutMs: waitLimit.Milliseconds()})
	}()
	<-started
	cancel() // the process stops: the call in flight drains

	// A server whose connector never beats, seen after the stop began: once it is declared,
	// the watchdog has had the time to declare the draining one too.
	data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "control", Status: subjects.StatusReady,
		Connector: "silent", HeartbeatMs: beat.Milliseconds(), At: time.Now()})
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("control"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the control server declared", func() bool { return last(statuses(t, env, "control")).Code == subjects.CodeConnectorLost })
	if st := last(statuses(t, env, "hold")); st.Code == subjects.CodeConnectorLost {
		t.Errorf("a stopping registrysync draining a call was declared lost: %+v", st)
	}

	releaseOnce.Do(func() { close(release) })
	if r := <-replied; r.Error != nil {
		t.Errorf("the call in flight: %+v", r.Error)
	}
	<-done
	for _, st := range statuses(t, env, "hold") {
		if st.Code == subjects.CodeConnectorLost {
			t.Errorf("declared lost while stopping cleanly: %+v", st)
		}
	}
	if st := last(statuses(t, env, "hold")); st.Code != subjects.CodeConnectorStopped {
		t.Errorf("last status %+v, want connector_stopped", st)
	}
}
