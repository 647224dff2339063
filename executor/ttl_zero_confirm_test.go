package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// relisterFunc is a Relister scripted by a test.
type relisterFunc func(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply

func (f relisterFunc) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	return f(ctx, server, req)
}

// A call of a tool whose list has ttlMs 0 runs on the list its re-list confirmed, not on
// another one the view came to hold meanwhile. Here the re-list finds the server's list
// unchanged (f1), while a snapshot of another list (f-other: a connector on a host whose clock
// is ahead, applied late) reaches the executor: its listedAt, an hour ahead, is taken as when it
// arrived, after the re-list was asked. The call ran on f-other's definition — a list nothing
// confirmed, ttlMs 0 or not — because "listed at or after the re-list was asked" was taken for
// "confirmed by it"; it is refused unavailable (re-listed again by the caller's retry).
func TestTTLZeroRelistConfirmsOnlyItsList(t *testing.T) {
	disp := &recordingDispatcher{}
	r := startRig(t, rigOptions{servers: []string{}, noExecutor: true})
	zero := int64(0)
	snap := func(fp string, at time.Time, def string) {
		r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
			Server: "vault", Kind: subjects.KindTools, Fingerprint: fp, ListedAt: at, TTLMs: &zero,
			Items: []json.RawMessage{json.RawMessage(def)}})
	}
	var ex atomic.Pointer[Executor]
	var relists atomic.Int32
	rel := relisterFunc(func(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
		relists.Add(1)
		snap("f-other", time.Now().Add(time.Hour), `{"name":"move","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},"annotations":{"readOnlyHint":true}}`)
		for ctx.Err() == nil {
			if t := ex.Load().reg.lookup("vault__move"); t != nil && t.Fingerprint == "f-other" {
				return subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", ListedAt: time.Now().UTC()}
			}
			time.Sleep(5 * time.Millisecond) // (polls until the snapshot is applied, bounded by ctx)
		}
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeTimeout, Message: "test: f-other never applied"}}
	})
	ex.Store(r.startExecutor(Config{Dispatcher: disp, Relister: rel}, r.env.NC))
	r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	snap("f1", time.Now(), `{"name":"move","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)
	r.waitTool("vault__move")

	res := r.call("local", "vault__move", `{"n":1}`)
	if relists.Load() == 0 {
		t.Fatal("no re-list before the call of a ttlMs 0 list")
	}
	if res.Error != nil && res.Error.Code == subjects.CodeTimeout {
		t.Fatalf("the scripted re-list failed: %+v", res.Error)
	}
	disp.mu.Lock()
	dispatched := len(disp.reqs)
	disp.mu.Unlock()
	if res.Status == subjects.CallOK || dispatched != 0 {
		t.Fatalf("got %s %+v, dispatched %d: want refused unavailable (the re-list confirmed f1; the view holds f-other)", res.Status, res.Error, dispatched)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("got %s %+v, want refused unavailable", res.Status, res.Error)
	}
}
