package indexer

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// confirmedAfter is a Confirmed event with an afterSeq, as registrysync publishes for an
// unchanged re-list after a ListChanged (written as JSON: the wire form is what counts).
func confirmedAfter(server, fp string, at time.Time, after uint64) rawEvent {
	return rawEvent{subjects.RegistryConfirmed(server, subjects.KindTools), fmt.Appendf(nil,
		`{"v":1,"type":"confirmed","server":%q,"kind":"tools","fingerprint":%q,"listedAt":%q,"afterSeq":%d}`,
		server, fp, at.Format(time.RFC3339Nano), after)}
}

// A Confirmed event that answers a list_changed (it names the fingerprint held and an afterSeq
// at least the ListChanged's sequence) makes the list fresh again, in the catalog's answers,
// its servers listing and its stored state; one whose re-list began before the ListChanged
// (a lower afterSeq) leaves it stale. A restarted replica (its view rebuilt from what it
// stored) decides the same, and replicas rebuilt by replay hold the same content and answers.
func TestConfirmedLiftsAnsweredListChanged(t *testing.T) {
	env := natstest.Start(t)
	dir := t.TempDir()
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	seq := publish(t, env.JS, status("kb", subjects.StatusReady), sn)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	same := func(step string, a *replica) {
		t.Helper()
		b := startReplica(t, env, "", nil, nil)
		waitSeq(t, b.Catalog, a.Seq())
		if da, db := digestOf(t, a.Catalog), digestOf(t, b.Catalog); da != db {
			t.Errorf("%s: digest %s, of a replica rebuilt by replay %s", step, da, db)
		}
		if va, vb := view(t, a.Catalog), view(t, b.Catalog); va != vb {
			t.Errorf("%s: a replica rebuilt by replay answers otherwise:\n%s", step, firstDiff(vb, va))
		}
		b.stop(t)
	}
	check := func(step string, r *replica, want string) {
		t.Helper()
		if state, _ := detail(t, r.Catalog, "kb__search"); state != want {
			t.Errorf("%s: %s, want %s", step, state, want)
		}
	}
	check("listed", r, subjects.StateFresh)
	changedSeq := publish(t, env.JS, changed("kb"))
	seq = publish(t, env.JS, confirmedAfter("kb", sn.Fingerprint, t0.Add(time.Second), changedSeq-1),
		confirmedAfter("kb", "another", t0.Add(time.Second), changedSeq),
		confirmed("kb", sn.Fingerprint, t0.Add(2*time.Second))) // no afterSeq
	waitSeq(t, r.Catalog, seq)
	check("list_changed, then confirmations that do not answer it", r, subjects.StateStale)
	same("stale", r)

	// Restarted: the list is still stale for that ListChanged, and the answer lifts it.
	r.stop(t)
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check("stale, after a restart", r, subjects.StateStale)
	seq = publish(t, env.JS, confirmedAfter("kb", sn.Fingerprint, t0.Add(3*time.Second), changedSeq))
	waitSeq(t, r.Catalog, seq)
	check("the confirmation that answers the list_changed", r, subjects.StateFresh)
	srv := r.Servers(t.Context(), subjects.ServersRequest{V: 1})
	mustNoErr(t, srv.Error)
	if len(srv.Servers) != 1 || srv.Servers[0].Status != subjects.StatusReady {
		t.Errorf("servers: %+v", srv.Servers)
	}
	same("lifted", r)
	r.stop(t)
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check("lifted, after a restart", r, subjects.StateFresh)
	if got := r.Stats().BadEvents; got != 0 {
		t.Errorf("bad events: %d, want 0", got)
	}
}
