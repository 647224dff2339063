package indexer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestListedAtAheadAcrossRestart: a listedAt ahead of the replica's clock is applied as the
// time the list reached the replica (staleness: its TTL runs from then), but the catalog stored
// it as listed, and a restarted replica rebuilt its freshness view from that: its TTL ran from
// the restart, and a tool that was expired before the restart was fresh after it. A replica
// restarted over the same directory shows what it showed before (state and listedAt), and its
// stored content stays that of a replica rebuilt by replay (the same digest).
func TestListedAtAheadAcrossRestart(t *testing.T) {
	env := natstest.Start(t)
	dir := t.TempDir()
	var now atomic.Int64 // the replicas' clock, in seconds after t0
	clock := func() time.Time { return t0.Add(time.Duration(now.Load()) * time.Second) }
	start := func(dir string) *replica {
		return startReplicaConfig(t, env, Config{Dir: dir, Now: clock}, nil)
	}
	ttl := int64(30_000)
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn.TTLMs, sn.ListedAt = &ttl, t0.Add(time.Hour) // stamped by a host an hour ahead
	seq := publish(t, env.JS, status("kb", subjects.StatusReady), sn)
	r := start(dir)
	waitSeq(t, r.Catalog, seq)

	// check compares the replica's answer with the one of the same replica restarted over its
	// directory, and with want.
	check := func(step, wantState string, wantAt time.Time) {
		t.Helper()
		want := wantAt.Format(time.RFC3339Nano)
		if state, at := detail(t, r.Catalog, "kb__search"); state != wantState || at != want {
			t.Errorf("%s: %s listed at %s, want %s listed at %s", step, state, at, wantState, want)
		}
		r.stop(t)
		r = start(dir)
		waitSeq(t, r.Catalog, seq)
		if state, at := detail(t, r.Catalog, "kb__search"); state != wantState || at != want {
			t.Errorf("%s, after a restart: %s listed at %s, want %s listed at %s", step, state, at, wantState, want)
		}
	}
	check("snapshot stamped an hour ahead", subjects.StateFresh, sn.ListedAt)
	now.Store(31) // 31 s after the list reached the replica, ttl 30 s
	check("31 s after it came", string(staleness.Expired), sn.ListedAt)

	// A confirmation stamped ahead too restarts the TTL from when it came.
	seq = publish(t, env.JS, confirmed("kb", sn.Fingerprint, t0.Add(2*time.Hour)))
	waitSeq(t, r.Catalog, seq)
	check("confirmation stamped two hours ahead", subjects.StateFresh, t0.Add(2*time.Hour))
	now.Store(62)
	check("31 s after the confirmation came", string(staleness.Expired), t0.Add(2*time.Hour))

	// A confirmation on the replica's clock, later than the one it applied.
	now.Store(70)
	seq = publish(t, env.JS, confirmed("kb", sn.Fingerprint, t0.Add(65*time.Second)))
	waitSeq(t, r.Catalog, seq)
	check("confirmation on this clock", subjects.StateFresh, t0.Add(2*time.Hour))
	now.Store(96)
	check("31 s after it", string(staleness.Expired), t0.Add(2*time.Hour))

	// What is stored of the stream does not depend on the clock: a replica rebuilt by replay
	// (now, so with other times applied) holds the same content.
	b := start("")
	waitSeq(t, b.Catalog, seq)
	da, err := r.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("digest of the restarted replica %s, of one rebuilt by replay %s", da, db)
	}

	// A snapshot on the replica's clock after all that: its listedAt as is, before and after a
	// restart.
	sn2 := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn2.TTLMs, sn2.ListedAt = &ttl, t0.Add(90*time.Second)
	seq = publish(t, env.JS, sn2)
	waitSeq(t, r.Catalog, seq)
	check("snapshot on this clock", subjects.StateFresh, sn2.ListedAt)
	now.Store(121)
	check("31 s after its listedAt", string(staleness.Expired), sn2.ListedAt)
}
