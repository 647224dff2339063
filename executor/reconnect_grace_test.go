package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// okDispatcher answers every call with an empty result.
type okDispatcher struct{}

func (okDispatcher) Dispatch(context.Context, string, subjects.DispatchRequest) subjects.DispatchReply {
	return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
}

// After a restart, calls queued while everything was down are taken before the connectors are
// back: a call to a server whose connector stopped (or that is connecting again) waits for it
// in the executor's first ReconnectGrace instead of being refused unavailable.
func TestRestartWaitsForReconnect(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	status := func(st, code string) {
		r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: st, Code: code})
	}
	status(subjects.StatusReady, "")
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"peek","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}})
	// The previous process stopped its connectors.
	status(subjects.StatusUnavailable, subjects.CodeConnectorStopped)
	r.startExecutor(r.managerConfig(Config{Dispatcher: okDispatcher{}}), r.env.NC)
	r.waitTool("vault__peek")

	answer := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "queued-1", Tool: "vault__peek", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			res.Error = &subjects.Error{Code: "client", Message: err.Error()}
		}
		answer <- res
	}()
	// The call is taken while the server is still away; then its connector comes back.
	waitFor(t, "the call taken", func() bool { return len(r.auditEvents("local", "queued-1")) > 0 })
	select {
	case res := <-answer:
		t.Fatalf("answered before the server came back: %s %+v", res.Status, res.Error)
	default:
	}
	status(subjects.StatusConnecting, "")
	status(subjects.StatusReady, "")
	res := <-answer
	if res.Status != subjects.CallOK {
		t.Errorf("got %s %+v, want ok once the server is back", res.Status, res.Error)
	}

	// A server that failed to connect is refused at once, grace or not.
	status(subjects.StatusUnavailable, subjects.CodeConnectFailed)
	// (Once the executor applied it: it reads the registry stream on its own.)
	waitFor(t, "the executor sees connect_failed", func() bool {
		return r.ex.reg.view.Tool("vault", "peek").State == staleness.Unavailable
	})
	if res := r.call("local", "vault__peek", `{}`); res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Errorf("got %s %+v, want unavailable", res.Status, res.Error)
	}
}
