package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// gatedRelister tells the test when a re-list is asked and answers it with what the test gives.
type gatedRelister struct {
	asked chan struct{}
	reply chan subjects.RelistReply
}

func (g *gatedRelister) Relist(ctx context.Context, _ string, _ subjects.RelistRequest) subjects.RelistReply {
	select {
	case g.asked <- struct{}{}:
	default:
	}
	select {
	case rep := <-g.reply:
		return rep
	case <-ctx.Done():
		return subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{Code: subjects.CodeTimeout, Message: "test: no reply"}}
	}
}

// relistRig starts a rig whose executor re-lists with rel, past its ReconnectGrace (no
// unavailable answer is waited out), and publishes 20 events of another server: a stream that
// has held more events than it holds once its lists are published again.
func relistRig(t *testing.T, rel Relister, disp Dispatcher, hooks testHooks) *rig {
	r := startRig(t, rigOptions{servers: []string{}, exec: Config{Dispatcher: disp, Relister: rel, ReconnectGrace: -1, hooks: hooks}})
	for range 20 {
		r.publishRegistry(subjects.RegistryStatus("pad"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "pad", Status: subjects.StatusReady})
	}
	return r
}

// publishVaultTTL publishes server vault ready, then its list of fingerprint (one read-only
// tool, move, with ttlMs), and returns both events' sequences.
func publishVaultTTL(r *rig, fingerprint string, ttlMs int64) (status, snapshot uint64) {
	r.t.Helper()
	return publishVaultTTLAs(r, fingerprint, ttlMs, `"readOnlyHint":true`)
}

// publishVaultTTLAs is publishVaultTTL with move's annotation given (`"destructiveHint":true`,
// say).
func publishVaultTTLAs(r *rig, fingerprint string, ttlMs int64, annotation string) (status, snapshot uint64) {
	r.t.Helper()
	status = r.publishRegistry(subjects.RegistryStatus("vault"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "vault", Status: subjects.StatusReady})
	snapshot = r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: fingerprint, ListedAt: time.Now(), TTLMs: &ttlMs,
		Items: []json.RawMessage{json.RawMessage(`{"name":"move","inputSchema":{"type":"object"},"annotations":{` + annotation + `}}`)}})
	return status, snapshot
}

// callExpired calls vault__move, whose list's TTL ran out, and waits until it is re-listed
// (rel asked); the answer comes on the channel returned.
func callExpired(ctx context.Context, t *testing.T, r *rig, rel *gatedRelister, id string) <-chan subjects.CallResult {
	t.Helper()
	waitFor(t, "vault's list expired", func() bool { return r.ex.reg.view.Tool("vault", "move").State == staleness.Expired })
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "vault__move", Principal: subjects.Principal{User: "local"}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	select {
	case <-rel.asked:
	case <-ctx.Done():
		t.Fatal("the expired list was not re-listed")
	}
	return done
}

// A call of a tool whose list's TTL ran out is re-listed; the re-list answers with the sequence
// of the snapshot it stored, and the call waits for the view to apply it. The registry stream
// is then deleted and created again, and registrysync publishes its lists again in the new
// stream, whose sequences start over: that sequence names nothing the view will apply. The call
// waited for it until the re-list's timeout, then was refused unavailable ("the new list did
// not arrive in time") though the view, caught up with the new stream, held the tool's list
// fresh. It is decided on the view caught up with the new stream: the list published again,
// fresh, and the call runs.
func TestRelistAcrossRegistryRecreation(t *testing.T) {
	every := registryInfoEvery
	registryInfoEvery = 50 * time.Millisecond
	t.Cleanup(func() { registryInfoEvery = every })
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := relistRig(t, rel, disp, testHooks{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	_, last := publishVaultTTL(r, "f1", 1)
	done := callExpired(ctx, t, r, rel, "relisted-recreated")

	if err := r.env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, r.env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	publishVaultTTL(r, "f2", time.Hour.Milliseconds()) // published again, as registrysync restores
	waitFor(t, "the executor to replay the stream created again", func() bool {
		r.ex.reg.mu.RLock()
		defer r.ex.reg.mu.RUnlock()
		select {
		case <-r.ex.reg.caught:
			return r.ex.reg.view.Tool("vault", "move").Fingerprint == "f2"
		default:
			return false
		}
	})
	// The re-list stored its snapshot after the last event the view applied, in the stream
	// since deleted.
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f2", Sequence: last + 1, ListedAt: time.Now()}
	res := <-done
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once (the list held fresh in the view caught up with the stream created again)", res.Status, res.Error, disp.n.Load())
	}
}

// A call waiting for the view to apply its re-list's snapshot when the registry stream is
// purged (registry.follow drops the view and replays the stream) was not released: the replay
// never applies that sequence (purged before the view applied it), and the call waited until
// the re-list's timeout to be refused unavailable. Its wait ends with the drop; it then waits
// for the replay to catch up, as a call admitted during a replay does (not decided on the view
// part way through it, which holds vault's status but not yet its list), and runs on the list
// the replay restores, which its re-list confirmed.
func TestRelistWaitEndsWhenRegistryReplays(t *testing.T) {
	p := newReplayPause(t)
	rel := &gatedRelister{asked: make(chan struct{}, 1), reply: make(chan subjects.RelistReply, 1)}
	disp := &countDispatcher{}
	r := relistRig(t, rel, disp, p.hooks())
	p.resumeAtCleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	status, last := publishVaultTTL(r, "f1", 1)
	p.at.Store(status) // the replay stops at vault's status, before its list
	done := callExpired(ctx, t, r, rel, "relisted-purged")
	rel.reply <- subjects.RelistReply{V: subjects.Version, Fingerprint: "f1", Sequence: last + 1, ListedAt: time.Now()}
	waitFor(t, "the call to wait for the re-list's snapshot", func() bool {
		r.ex.reg.mu.Lock()
		defer r.ex.reg.mu.Unlock()
		return len(r.ex.reg.waiters[last+1]) == 1
	})

	p.replayFrom(ctx, t, r, status) // (the re-list's snapshot purged before the view applied it)
	select {
	case <-p.waiting:
	case res := <-done:
		t.Fatalf("answered while the replay was stopped: %s %+v, want the call to wait for the replay", res.Status, res.Error)
	case <-ctx.Done():
		t.Fatal("the call neither waited for the replay nor was answered")
	}
	p.resumeReplay()
	res := <-done
	if res.Status != subjects.CallOK || disp.n.Load() != 1 {
		t.Errorf("answer %s %+v, dispatched %d times: want ok, once", res.Status, res.Error, disp.n.Load())
	}
}
