package registrysync

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// Connector A holds a notification back (its ListChanged S1 waits; the server's list changed
// since) and watches for another connector's answer with a core NATS subscription. B answers
// S1 while A's connection to NATS is down (a partition of A alone, a NATS restart A reconnects
// to later than B): the watch never gets that answer. Consumers then had the tools fresh again
// from B's answer — B's list, from before the change — and A stored nothing once its connection
// was back: they stayed fresh until A's own re-list (here never: its debounce is an hour; in
// production the debounce after the notification, or the list retry backoff, up to BackoffMax,
// when A's re-lists failed during the outage). Once the connection is back, A must find the
// answer on the stream and store a ListChanged.
func TestHeldBackAnswerWhileCutOff(t *testing.T) {
	for _, answer := range []string{"confirmed", "snapshot"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			env := natstest.Start(t)
			proxy := startCutProxy(t, strings.TrimPrefix(env.URL, "nats://"))
			srvA, srvB := newFixture(fixtureOptions{}), newFixture(fixtureOptions{})
			cfgA := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvA), Kinds: []string{"tools"}})
			cfgA.Debounce = time.Hour // A's own re-list never comes by itself
			cfgB := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srvB), Kinds: []string{"tools"}})
			rec := record(t, env, subjects.RegistryServer("fx"))

			hA, ncA := runVia(t, env, proxy.url(), cfgA)
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

			// N1: A stores S1. N2, the list changing: S1 waits, A holds N2 back.
			srvA.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
			handled("the first notification")
			s1 := rec.wait(first.seq, "list_changed S1", isChanged(subjects.KindTools))
			srvA.AddTool(mcp.NewTool("added", mcp.WithDescription("Added after S1.")), nil)
			handled("the change")
			if seq := lastSeq(t, env, subjects.RegistryChanged("fx", subjects.KindTools)); seq != s1.seq {
				t.Fatalf("the last list_changed is #%d, want S1 #%d (A stores none while it waits)", seq, s1.seq)
			}
			hA.m.mu.Lock()
			c := hA.m.conns["fx"]
			hA.m.mu.Unlock()
			c.pubMu.Lock()
			h := c.held[subjects.KindTools]
			var subs int
			if h != nil {
				subs = len(h.subs)
				for _, sub := range h.subs {
					// The NATS client never drops the watch's messages (a slow consumer).
					if msgs, bytes, err := sub.PendingLimits(); err != nil || msgs >= 0 || bytes >= 0 {
						t.Errorf("the watch of %s has pending limits %d messages, %d bytes (%v), want none", sub.Subject, msgs, bytes, err)
					}
				}
			}
			c.pubMu.Unlock()
			if subs != 2 {
				t.Fatalf("A holds N2 back with %d watch subscriptions, want 2 (snapshot, confirmed)", subs)
			}

			// A is cut off from NATS; B answers S1 with a list that began after S1, before the
			// change (B's session has not seen it).
			proxy.setCut(true)
			waitUntil(t, "A cut off", func() bool { return !ncA.IsConnected() })
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
				srvB.AddTool(mcp.NewTool("b_only", mcp.WithDescription("B's change.")), nil)
				ans = rec.wait(s1.seq, "B's snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
					return hasName(t, s, "b_only")
				}))
			}
			if got := replayedAt(rec, ans.seq); got.State == staleness.Stale {
				t.Fatalf("after B's answer %s: %s (%s), want no longer stale (what A must undo)", ans, got.State, got.Reason)
			}
			t.Logf("B's answer %s, stored while A is cut off: consumers have the tools fresh, without A's change", ans)

			// A is back: the next event of the kind after B's answer must be A's ListChanged.
			proxy.setCut(false)
			waitUntil(t, "A reconnected", ncA.IsConnected)
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
			if r := hA.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
				t.Fatalf("A's relist: %+v", r.Error)
			}
			snap := rec.wait(next.seq, "A's snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
				return hasName(t, s, "added")
			}))
			if got := replayedAt(rec, snap.seq); got.State == staleness.Stale {
				t.Errorf("after A's snapshot %s: %s (%s), want no longer stale", snap, got.State, got.Reason)
			}
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
