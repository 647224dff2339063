package executor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// startCatalog runs an indexer replica (in memory) on the rig's stream, with the clock now.
func startCatalog(t *testing.T, r *rig, now func() time.Time) *indexer.Catalog {
	t.Helper()
	cat, err := indexer.Open(indexer.Config{InMemory: true, Now: now, Log: testLogger(t).With().Str("role", "indexer").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cat.Follow(ctx, r.env.JS) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follow: %v", err)
		}
		cat.Close()
	})
	return cat
}

// When a list's ttlMs has run out and a re-list (an executor's, before a call) finds it
// unchanged, every consumer sees it fresh again — an indexer replica and the executor that did
// not ask, not only the one that did — through the Confirmed event registrysync publishes; a
// replica rebuilt by replay holds the same.
func TestConfirmationReachesEveryConsumer(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	rel := [2]*counter{{}, {}}
	ex := [2]*Executor{}
	for i := range ex {
		ex[i] = r.startExecutor(Config{Dispatcher: r.mgr, Relister: countingRelister{inner: r.mgr, n: rel[i]}}, r.env.NC)
	}
	r.waitTool("fixture__echo")
	// The replica's clock can be stopped, so that what it shows does not depend on how fast
	// the machine is.
	var frozen atomic.Pointer[time.Time]
	cat := startCatalog(t, r, func() time.Time {
		if p := frozen.Load(); p != nil {
			return *p
		}
		return time.Now()
	})
	details := func(c *indexer.Catalog) subjects.ToolInfo {
		t.Helper()
		rep := c.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"fixture__echo"}})
		if rep.Error != nil || len(rep.Tools) != 1 {
			t.Fatalf("details: %+v", rep.Error)
		}
		return rep.Tools[0]
	}
	waitFor(t, "catalog lists fixture__echo", func() bool {
		_, _, ok := cat.Lookup("fixture__echo")
		return ok && cat.Ready()
	})
	waitFor(t, "catalog shows fixture__echo expired", func() bool { return details(cat).State == string(staleness.Expired) })

	stream, err := r.env.JS.Stream(context.Background(), subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	lastConfirmed := func() *subjects.Confirmed {
		t.Helper()
		msg, err := stream.GetLastMsgForSubject(context.Background(), subjects.RegistryConfirmed("fixture", subjects.KindTools))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
		if err != nil {
			t.Fatalf("confirmation %s: %v", msg.Data, err)
		}
		return ev.Confirmed
	}
	// The fixture's ttlMs is 400 ms: registrysync confirms it at most once a second. Call
	// whenever both executors see the list expired (the one that takes the call re-lists it,
	// and confirms it for itself) until a confirmation is on the stream.
	var cf *subjects.Confirmed
	asker := -1 // the executor whose re-list published it
	for i := 0; cf == nil; i++ {
		if i == 20 {
			t.Fatalf("no confirmation on the stream after %d calls that re-listed", i)
		}
		waitFor(t, "both executors see the list expired", func() bool {
			return ex[0].reg.view.Tool("fixture", "echo").State == staleness.Expired &&
				ex[1].reg.view.Tool("fixture", "echo").State == staleness.Expired
		})
		before := [2]int{rel[0].get("fixture"), rel[1].get("fixture")}
		if res := r.call("local", "fixture__echo", `{"text":"again"}`); res.Status != subjects.CallOK {
			t.Fatalf("call after the ttl ran out: %s %+v, want ok after a re-list", res.Status, res.Error)
		}
		cf = lastConfirmed()
		for j := range rel {
			if rel[j].get("fixture") > before[j] {
				asker = j
			}
		}
	}
	if asker < 0 {
		t.Fatal("no executor re-listed")
	}
	other := ex[1-asker]
	want := cf.ListedAt.UTC().Format(time.RFC3339Nano)

	// The replica, and the executor that did not ask, learn of it from the stream.
	waitFor(t, "catalog listedAt moves to the confirmation's", func() bool { return details(cat).ListedAt == want })
	waitFor(t, "the other executor's listedAt moves to the confirmation's", func() bool {
		return other.reg.view.Tool("fixture", "echo").ListedAt.Equal(cf.ListedAt)
	})
	if got := ex[asker].reg.view.Tool("fixture", "echo").ListedAt; got.Before(cf.ListedAt) {
		t.Errorf("the executor that asked: listed at %s, before the confirmation's %s", got, cf.ListedAt)
	}
	at := cf.ListedAt.Add(time.Millisecond)
	frozen.Store(&at)
	if got := details(cat); got.State != string(staleness.Fresh) {
		t.Errorf("catalog just after the confirmation: %s (%s), want fresh", got.State, got.StateReason)
	}
	v := other.reg.view.Tool("fixture", "echo")
	if since := time.Since(v.ListedAt); v.State != staleness.Fresh && since <= 400*time.Millisecond {
		t.Errorf("the other executor, %s after the confirmation: %s (%s), want fresh", since, v.State, v.Reason)
	}

	// A replica rebuilt by replay holds the same.
	re := startCatalog(t, r, func() time.Time { return at })
	waitFor(t, "the rebuilt replica caught up", func() bool { return re.Ready() && re.Seq() >= cat.Seq() })
	d1, err := cat.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := re.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("digest of the live replica %s, of the rebuilt one %s", d1, d2)
	}
	if got := details(re); got.State != string(staleness.Fresh) || got.ListedAt != want {
		t.Errorf("rebuilt replica: %s listed at %s, want fresh listed at %s", got.State, got.ListedAt, want)
	}
}
