package registrysync

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestKeptTTLIsTheStreamsList: a list taken for the stored one (keepStoredTTL: it differs from
// it only by a longer ttlMs) was confirmed under the fingerprint the connector remembered, not
// the stream's last snapshot: another connector of the server (a hand-over) may have stored the
// list since, with the server's longer ttlMs. The connector then confirmed, and answered the
// executors' re-lists of the expired list with, a fingerprint no consumer holds: every
// executor refused the server's tools unavailable ("the re-list did not confirm the list") for
// as long as the server listed that ttlMs, where a list that differed from the stored one was
// published (a duplicate of the stream's: recorded).
func TestKeptTTLIsTheStreamsList(t *testing.T) {
	env := natstest.Start(t)
	var ttlA, ttlB atomic.Int64
	ttlA.Store(60000)
	ttlB.Store(60000)
	urlA := ttlRewriter(t, server.NewStreamableHTTPServer(newFixture(fixtureOptions{ttlMs: 60000})), ttlA.Load)
	urlB := ttlRewriter(t, server.NewStreamableHTTPServer(newFixture(fixtureOptions{ttlMs: 60000})), ttlB.Load)
	rec := record(t, env, subjects.RegistryServer("jit"))

	hA := run(t, env, fastConfig(ServerConfig{Name: "jit", URL: urlA, Kinds: []string{"tools"}}))
	waitUntil(t, "A ready", hA.m.Ready)
	first := rec.wait(0, "A's snapshot", isSnapshot(subjects.KindTools, nil))

	// B (the same server, run by another process) stores lists A never hears of: a ttlMs far
	// longer (not taken for the stored one), then 90 s (shorter than that one: published).
	ttlB.Store(600000)
	hB := run(t, env, fastConfig(ServerConfig{Name: "jit", URL: urlB, Kinds: []string{"tools"}}))
	waitUntil(t, "B ready", hB.m.Ready)
	relistB := func(ttl int64, after uint64) event {
		t.Helper()
		ttlB.Store(ttl)
		if r := hB.m.Relist(context.Background(), "jit", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
			t.Fatalf("B's re-list: %+v", r.Error)
		}
		return rec.wait(after, "B's snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
			return s.TTLMs != nil && *s.TTLMs == ttl
		}))
	}
	long := relistB(600000, first.seq)
	cur := relistB(90000, long.seq)

	// The server now lists 90 s for A too: the stream holds that very list.
	ttlA.Store(90000)
	r := hA.m.Relist(context.Background(), "jit", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	if r.Error != nil {
		t.Fatalf("A's re-list: %+v", r.Error)
	}
	if r.Fingerprint != cur.ev.Snapshot.Fingerprint {
		t.Errorf("A's re-list answered fingerprint %s, want the stream's last snapshot's %s (ttlMs 90000): consumers hold that one", r.Fingerprint, cur.ev.Snapshot.Fingerprint)
	}

	// A now knows the stream's list: a longer ttlMs (up to twice it) is taken for it, and the
	// re-list (an executor's, of the expired list) is answered with its fingerprint, which the
	// executor confirms.
	ttlA.Store(150000)
	r = hA.m.Relist(context.Background(), "jit", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	if r.Error != nil {
		t.Fatalf("A's re-list: %+v", r.Error)
	}
	if r.Fingerprint != cur.ev.Snapshot.Fingerprint || r.Sequence != 0 {
		t.Errorf("A's re-list of a longer ttlMs answered fingerprint %s (sequence %d), want the stream's %s unchanged", r.Fingerprint, r.Sequence, cur.ev.Snapshot.Fingerprint)
	}
	for _, e := range rec.all() {
		if e.seq > cur.seq && e.ev.Confirmed != nil && e.ev.Confirmed.Fingerprint != cur.ev.Snapshot.Fingerprint {
			t.Errorf("#%d confirms fingerprint %s, not the stream's last snapshot's", e.seq, e.ev.Confirmed.Fingerprint)
		}
		if e.seq > cur.seq && e.ev.Snapshot != nil {
			t.Errorf("#%d: a snapshot stored (ttlMs %v), want the stream's list taken as it is", e.seq, e.ev.Snapshot.TTLMs)
		}
	}
}
