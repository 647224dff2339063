package indexer

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

func confirmed(server, fp string, at time.Time) *subjects.Confirmed {
	return &subjects.Confirmed{V: subjects.Version, Type: subjects.EventConfirmed, Server: server,
		Kind: subjects.KindTools, Fingerprint: fp, ListedAt: at}
}

// detail is the state and listedAt the catalog shows for one tool.
func detail(t *testing.T, c *Catalog, name string) (state, listedAt string) {
	t.Helper()
	rep := c.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{name}})
	mustNoErr(t, rep.Error)
	return rep.Tools[0].State, rep.Tools[0].ListedAt
}

// A Confirmed event (a re-list found the list unchanged) restarts the TTL of the list it names:
// the tool is fresh again with the confirmation's listedAt, after a restart of the replica too,
// and a replica rebuilt by replay holds the same. One of another fingerprint changes nothing,
// and one after a list_changed leaves the list stale until the snapshot that follows it.
func TestConfirmedRestartsTTL(t *testing.T) {
	env := natstest.Start(t)
	dir := t.TempDir()
	ttl := int64(30_000) // the test clock is t0 + 1 min: a list of t0 has run out
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn.TTLMs = &ttl
	seq := publish(t, env.JS, status("kb", subjects.StatusReady), sn)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check := func(step string, r *replica, wantState string, wantAt time.Time) {
		t.Helper()
		state, at := detail(t, r.Catalog, "kb__search")
		if want := wantAt.Format(time.RFC3339Nano); state != wantState || at != want {
			t.Errorf("%s: %s listed at %s, want %s listed at %s", step, state, at, wantState, want)
		}
	}
	check("snapshot of t0", r, string(staleness.Expired), t0)

	// Another list's confirmation (the snapshot that changed it is on its way): nothing.
	seq = publish(t, env.JS, confirmed("kb", "another", t0.Add(50*time.Second)))
	waitSeq(t, r.Catalog, seq)
	check("confirmation of another list", r, string(staleness.Expired), t0)

	seq = publish(t, env.JS, confirmed("kb", sn.Fingerprint, t0.Add(50*time.Second)),
		confirmed("kb", sn.Fingerprint, t0.Add(40*time.Second))) // late, older: ignored
	waitSeq(t, r.Catalog, seq)
	check("confirmed", r, subjects.StateFresh, t0.Add(50*time.Second))

	// A restarted replica resumes with it; a replica rebuilt by replay holds the same.
	r.stop(t)
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check("confirmed, after a restart", r, subjects.StateFresh, t0.Add(50*time.Second))
	sameDigest := func(step string, a *replica) {
		t.Helper()
		b := startReplica(t, env, "", nil, nil)
		waitSeq(t, b.Catalog, a.Seq())
		da, err := a.Digest()
		if err != nil {
			t.Fatal(err)
		}
		db, err := b.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if da != db {
			t.Errorf("%s: digest of the replica %s, of one rebuilt by replay %s", step, da, db)
		}
		state, at := detail(t, b.Catalog, "kb__search")
		wantState, wantAt := detail(t, a.Catalog, "kb__search")
		if state != wantState || at != wantAt {
			t.Errorf("%s: rebuilt replica shows %s listed at %s, the replica %s listed at %s", step, state, at, wantState, wantAt)
		}
		b.stop(t)
	}
	sameDigest("confirmed", r)

	// list_changed, then a confirmation of the list held (a re-list made before the change):
	// stale, and stays so across a restart and a replay.
	seq = publish(t, env.JS, changed("kb"), confirmed("kb", sn.Fingerprint, t0.Add(55*time.Second)))
	waitSeq(t, r.Catalog, seq)
	if state, _ := detail(t, r.Catalog, "kb__search"); state != subjects.StateStale {
		t.Errorf("list_changed then a confirmation: %s, want stale", state)
	}
	r.stop(t)
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	if state, _ := detail(t, r.Catalog, "kb__search"); state != subjects.StateStale {
		t.Errorf("list_changed then a confirmation, after a restart: %s, want stale", state)
	}
	sameDigest("stale", r)

	// The snapshot that follows the list_changed decides.
	sn2 := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn2.TTLMs, sn2.ListedAt = &ttl, t0.Add(56*time.Second)
	seq = publish(t, env.JS, sn2)
	waitSeq(t, r.Catalog, seq)
	check("snapshot after list_changed", r, subjects.StateFresh, t0.Add(56*time.Second))
	if got := r.Stats().BadEvents; got != 0 {
		t.Errorf("bad events: %d, want 0", got)
	}
}
