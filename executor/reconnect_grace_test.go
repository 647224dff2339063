package executor

import (
	"context"
	"encoding/json"
	"sync"
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

// After a crash (SIGKILL of `mcpstream up`, power loss) the registry's last status of a server
// is the dead connector's ready: nothing said it stopped. The calls queued across the restart
// are taken while the new process's connector still connects, and it refuses them, nothing
// sent ("not connected (connecting)", or no connector serves the server yet). In the
// executor's first ReconnectGrace such a refusal is waited out as awaitReconnect waits for a
// connecting server: before, the call was retried RetryMax times within about a second and
// answered unavailable, the queued call thrown away (seen killing up under load: calls
// accepted before the kill refused "server ticketing is not connected (connecting)").
func TestCrashRestartWaitsForConnector(t *testing.T) {
	var mu sync.Mutex
	refusals := 0
	const back = DefaultRetryMax + 2 // the connector is connected from this dispatch on
	disp := funcDispatcher(func(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
		mu.Lock()
		defer mu.Unlock()
		if refusals < back {
			refusals++
			if refusals == 1 {
				return subjects.DispatchReply{V: 1, NotSent: true, Error: &subjects.Error{Code: subjects.CodeUnavailable,
					Message: "no connector serves server vault; nothing was sent"}}
			}
			return subjects.DispatchReply{V: 1, NotSent: true, Error: &subjects.Error{Code: subjects.CodeUnavailable,
				Message: "server vault is not connected (connecting); nothing was sent"}}
		}
		return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
	})
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	// What the killed process's connector published last: ready, and the list.
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"push","inputSchema":{"type":"object"}}`)}})
	r.startExecutor(r.managerConfig(Config{Dispatcher: disp}), r.env.NC)
	r.waitTool("vault__push")

	res := r.call("local", "vault__push", `{}`)
	mu.Lock()
	n := refusals
	mu.Unlock()
	if res.Status != subjects.CallOK {
		t.Errorf("got %s %+v after %d refusals of the connector, want ok once it is connected (refused %d times before)", res.Status, res.Error, n, back)
	}
}

// A call waiting in dispatch for its server's new connector (TestCrashRestartWaitsForConnector)
// was admitted against the dead connector's last list. The new connector lists the server
// again once connected, and what it lists may differ (the restart is also an upgrade): a tool
// that is now destructive needs approval, one with another inputSchema takes other arguments.
// The call was sent anyway, under a definition nobody admitted: here a side-effecting tool
// re-listed destructive ran without the approval the default policy asks for. It is answered
// stale now, nothing sent, as a call found stale at dispatch is.
func TestCrashRestartRelistedWhileWaiting(t *testing.T) {
	var r *rig
	var ex *Executor
	var mu sync.Mutex
	refusals, sent := 0, 0
	relist := func(destructive bool) {
		ann := ""
		fp := "f1"
		if destructive {
			ann, fp = `,"annotations":{"destructiveHint":true}`, "f2"
		}
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: time.Now(),
			Items: []json.RawMessage{json.RawMessage(`{"name":"push","inputSchema":{"type":"object"}` + ann + `}`)}})
	}
	disp := funcDispatcher(func(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
		mu.Lock()
		defer mu.Unlock()
		// Refused until past RetryMax (the new connector still connecting); meanwhile it
		// lists the server: push is destructive now.
		if refusals < DefaultRetryMax+1 {
			refusals++
			if refusals == DefaultRetryMax {
				relist(true)
				waitFor(t, "the re-list applied", func() bool {
					tl := ex.reg.lookup("vault__push")
					return tl != nil && tl.Destructive
				})
			}
			return subjects.DispatchReply{V: 1, NotSent: true, Error: &subjects.Error{Code: subjects.CodeUnavailable,
				Message: "server vault is not connected (connecting); nothing was sent"}}
		}
		sent++
		return subjects.DispatchReply{V: 1, Result: json.RawMessage(`{"content":[]}`)}
	})
	r = startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	relist(false)
	ex = r.startExecutor(r.managerConfig(Config{Dispatcher: disp}), r.env.NC)
	r.waitTool("vault__push")

	res := r.call("local", "vault__push", `{}`)
	mu.Lock()
	n := sent
	mu.Unlock()
	if n != 0 || res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Errorf("got %s %+v, sent %d times after push was re-listed destructive (approval required); want refused stale, nothing sent", res.Status, res.Error, n)
	}
}
