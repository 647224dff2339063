package registrysync

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// Two registrysync processes run server fx (a hand-over, or each with its own stdio child):
// connectors A and B. A stores a ListChanged for a notification; a second notification, the
// server's list changing, reaches A while that ListChanged still waits for its answer, so A
// stores none for it. Then B answers the waiting ListChanged with a list that began after it
// but before the change (B's session has not seen it): an unchanged re-list's Confirmed, or a
// snapshot of B's own. Consumers made the tools fresh again, though the server's list changed
// since, and stayed so until A's own debounced re-list (here never: its debounce is an hour).
// A must store a ListChanged again as soon as it sees that answer: one, however many
// notifications it held back.
func TestAnotherConnectorsAnswerAfterAHeldBackNotification(t *testing.T) {
	for _, answer := range []string{"confirmed", "snapshot"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			env := natstest.Start(t)
			srvA, srvB := newFixture(fixtureOptions{}), newFixture(fixtureOptions{})
			cfgA := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvA), Kinds: []string{"tools"}})
			cfgA.Debounce = time.Hour // A's own re-list never comes by itself
			cfgB := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvB), Kinds: []string{"tools"}})
			rec := record(t, env, subjects.RegistryServer("fx"))

			hA := run(t, env, cfgA)
			notified := make(chan subjects.Kind, 16)
			hook := func(server string, kind subjects.Kind) { notified <- kind }
			hA.m.afterNotified.Store(&hook)
			handled := func(what string) {
				t.Helper()
				select {
				case <-notified:
				case <-time.After(waitLimit):
					t.Fatalf("A did not handle %s within %s", what, waitLimit)
				}
			}
			waitUntil(t, "A ready", hA.m.Ready)
			first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
			hB := run(t, env, cfgB)
			waitUntil(t, "B ready", hB.m.Ready)

			// N1: A stores S1.
			srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
			handled("the first notification")
			s1 := rec.wait(first.seq, "list_changed S1", isChanged(subjects.KindTools))
			// N2, the list changing, and two more: S1 waits, A stores nothing for them.
			srvA.AddTool(mcp.NewTool("added", mcp.WithDescription("Added after S1.")), nil)
			handled("the change")
			for range 2 {
				srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
				handled("a further notification")
			}
			if seq := lastSeq(t, env, subjects.RegistryChanged("fx", subjects.KindTools)); seq != s1.seq {
				t.Fatalf("the last list_changed is #%d, want S1 #%d (A stores none while it waits)", seq, s1.seq)
			}

			// B answers S1 with a list that began after S1, before the change.
			var ans event
			switch answer {
			case "confirmed":
				if r := hB.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
					t.Fatalf("B's relist: %+v", r.Error)
				}
				ans = rec.wait(s1.seq, "B's answer", func(e event) bool {
					return e.ev.Confirmed != nil && e.ev.Confirmed.AfterSeq >= s1.seq
				})
			case "snapshot":
				// B's own server changes: B stores a ListChanged and re-lists (30 ms).
				srvB.AddTool(mcp.NewTool("b_only", mcp.WithDescription("B's change.")), nil)
				ans = rec.wait(s1.seq, "B's snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
					return hasName(t, s, "b_only")
				}))
			}
			t.Logf("B's answer: %s", ans)

			// Consumers must be stale again at once: the next event of the kind is A's ListChanged.
			next := rec.wait(ans.seq, "the event after B's answer", func(e event) bool {
				return isChanged(subjects.KindTools)(e) || e.ev.Confirmed != nil || isSnapshot(subjects.KindTools, nil)(e)
			})
			if next.ev.ListChanged == nil {
				t.Fatalf("after B's answer %s came %s, not a list_changed: the change A held back was usable meanwhile", ans, next)
			}
			if got := replayedAt(rec, next.seq); got.State != staleness.Stale {
				t.Errorf("after %s: %s (%s), want stale", next, got.State, got.Reason)
			}

			// A's own re-list (on demand here) answers it with the changed list.
			r := hA.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
			if r.Error != nil {
				t.Fatalf("A's relist: %+v", r.Error)
			}
			snap := rec.wait(next.seq, "A's snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
				return hasName(t, s, "added")
			}))
			if got := replayedAt(rec, snap.seq); got.State == staleness.Stale {
				t.Errorf("after A's snapshot %s: %s (%s), want no longer stale", snap, got.State, got.Reason)
			}
			// One ListChanged for the answer, however many notifications A held back.
			n := 0
			for _, e := range rec.all() {
				if e.seq > ans.seq && e.seq < snap.seq && isChanged(subjects.KindTools)(e) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d list_changed between B's answer #%d and A's snapshot #%d, want 1", n, ans.seq, snap.seq)
			}
		})
	}
}

// replayedAt is the freshness of fx's echo tool in a view that applied the recorded events up
// to seq.
func replayedAt(rec *recorder, seq uint64) staleness.Verdict {
	v := staleness.New(nil)
	for _, e := range rec.all() {
		if e.seq > seq {
			break
		}
		ev := e.ev
		ev.Seq = e.seq
		v.Apply(ev)
	}
	return v.Tool("fx", "echo")
}

// A's notifier handles, in one round, an answer its watch saw and a further notification (N3,
// come while it stored nothing): it stores a ListChanged for the answer (S2), after N3 came, so
// S2 stands for N3. It held N3 back all the same, and kept watching: B's answer to S2 (a list
// that began after S2, so after N3) made A store yet another ListChanged and re-list, consumers
// stale again for nothing; a server that keeps notifying turned every answer of B into two
// ListChanged events of A. A notification that a stored ListChanged (or a published list)
// stands for is not held back.
func TestNotificationCoveredByTheAnswersListChangedNotHeldBack(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	srvA, srvB := newFixture(fixtureOptions{}), newFixture(fixtureOptions{})
	cfgA := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvA), Kinds: []string{"tools"}})
	cfgA.Debounce = time.Hour // A's own re-list never comes by itself
	cfgB := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvB), Kinds: []string{"tools"}})
	rec := record(t, env, subjects.RegistryServer("fx"))

	hA := run(t, env, cfgA)
	notified := make(chan subjects.Kind, 16)
	hook := func(server string, kind subjects.Kind) { notified <- kind }
	hA.m.afterNotified.Store(&hook)
	handled := func(what string) {
		t.Helper()
		select {
		case <-notified:
		case <-time.After(waitLimit):
			t.Fatalf("A did not handle %s within %s", what, waitLimit)
		}
	}
	waitUntil(t, "A ready", hA.m.Ready)
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	hB := run(t, env, cfgB)
	waitUntil(t, "B ready", hB.m.Ready)
	hA.m.mu.Lock()
	c := hA.m.conns["fx"]
	hA.m.mu.Unlock()
	answerB := func(after uint64, what string) event {
		t.Helper()
		if r := hB.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
			t.Fatalf("B's relist: %+v", r.Error)
		}
		return rec.wait(after, what, func(e event) bool {
			return e.ev.Confirmed != nil && e.ev.Confirmed.AfterSeq >= after
		})
	}

	// N1: A stores S1. N2: S1 waits, A holds N2 back.
	srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	handled("N1")
	s1 := rec.wait(first.seq, "list_changed S1", isChanged(subjects.KindTools))
	srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	handled("N2")

	// N3 reaches A's notifier, which then waits for pubMu (held here) while B answers S1: one
	// round handles both.
	c.pubMu.Lock()
	locked := true
	defer func() {
		if locked {
			c.pubMu.Unlock()
		}
	}()
	gen := c.generation(subjects.KindTools)
	srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	waitUntil(t, "A's notifier took N3", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.gen[subjects.KindTools] > gen && !c.changed[subjects.KindTools]
	})
	ans1 := answerB(s1.seq, "B's answer to S1")
	waitUntil(t, "A's watch saw B's answer", func() bool {
		h := c.held[subjects.KindTools] // pubMu held here
		return h != nil && h.seen.Load()
	})
	c.pubMu.Unlock()
	locked = false
	handled("N3")
	s2 := rec.wait(ans1.seq, "list_changed S2", isChanged(subjects.KindTools))

	c.pubMu.Lock()
	h := c.held[subjects.KindTools]
	c.pubMu.Unlock()
	if h != nil {
		t.Errorf("after S2 #%d, stored once N3 came, A still holds notifications back (up to generation %d; N3 is %d)", s2.seq, h.gen, gen+1)
	}

	// B answers S2: nothing is held back, A stores nothing. A's own re-list ends the test.
	ans2 := answerB(s2.seq, "B's answer to S2")
	if r := hA.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
		t.Fatalf("A's relist: %+v", r.Error)
	}
	last := lastSeq(t, env, subjects.RegistryServer("fx"))
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	for _, e := range rec.all() {
		if e.seq > ans2.seq && isChanged(subjects.KindTools)(e) {
			t.Errorf("list_changed %s after B's answer %s to S2 #%d: S2 stood for every notification", e, ans2, s2.seq)
		}
	}
}
