package indexer

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestTailDeletedWhileDownReady: a replica restarted at sequence N, on a stream whose messages
// after N were all deleted (`nats stream rmm` of a hostile message, a subject purged), has
// nothing left to apply: it is ready at once. It waited for a message at the stream's last
// sequence (or one with nothing pending after it), which never came, and so never served
// until the registry published again.
func TestTailDeletedWhileDownReady(t *testing.T) {
	env := natstest.Start(t)
	dir := filepath.Join(t.TempDir(), "r")
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	want := digestOf(t, r.Catalog)
	r.stop(t)

	ctx := context.Background()
	s, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	bad := publish(t, env.JS, status("forged", subjects.StatusReady), snapshot("forged", "", tool("evil", "a forged tool")))
	for q := seq + 1; q <= bad; q++ {
		if err := s.DeleteMsg(ctx, q); err != nil {
			t.Fatalf("delete %d: %v", q, err)
		}
	}
	restarted := startReplica(t, env, dir, nil, nil)
	fresh := startReplica(t, env, "", nil, nil)
	for name, c := range map[string]*replica{"restarted": restarted, "rebuilt": fresh} {
		waitFor(t, name+" replica ready", c.Ready)
		if got := digestOf(t, c.Catalog); got != want {
			t.Errorf("%s replica differs from the catalog before the deleted messages", name)
		}
		if _, _, ok := c.Lookup("forged__evil"); ok {
			t.Errorf("%s replica holds a deleted message's tool", name)
		}
	}
	// And it follows on.
	seq = publish(t, env.JS, status("later", subjects.StatusReady), snapshot("later", "", tool("t", "a later tool")))
	for _, c := range []*replica{restarted, fresh} {
		waitSeq(t, c.Catalog, seq)
		if _, _, ok := c.Lookup("later__t"); !ok {
			t.Error("a message after the deleted ones is missing")
		}
	}
}

// TestPrivateRemovalReaddConverge: a private list, its server removed (a late snapshot after the
// removal, a forged payload naming it on another server's subject, a redelivered copy), then
// re-added as another authorization context's: a live replica, a restarted one and one
// rebuilt by replay hold the same catalog, and each principal sees only what its context may.
func TestPrivateRemovalReaddConverge(t *testing.T) {
	env := natstest.Start(t)
	priv := func(ctx string, items ...json.RawMessage) *subjects.Snapshot {
		sn := snapshot("pay", "Payroll", items...)
		sn.CacheScope, sn.AuthContext = subjects.ScopePrivate, ctx
		return sn
	}
	carol, dave := subjects.Principal{Tenant: "acme", User: "carol"}, subjects.Principal{Tenant: "acme", User: "dave"}
	dir := filepath.Join(t.TempDir(), "live")
	live := startReplica(t, env, dir, nil, nil)
	forged, _ := eventMsg(t, snapshot("other", "", tool("evil", "forged")))
	data, _ := json.Marshal(snapshot("pay", "Payroll", tool("evil", "forged")))
	late := priv("tenant:acme/user:carol", tool("get_salary", "salary"), tool("late_tool", "late"))
	seq := publish(t, env.JS,
		status("pay", subjects.StatusReady), priv("tenant:acme/user:carol", tool("get_salary", "salary")),
		status("pay", subjects.StatusUnavailable), status("pay", subjects.StatusRemoved), late, late,
		rawEvent{forged, data},
		status("pay", subjects.StatusReady), priv("tenant:acme/user:dave", tool("get_bonus", "bonus")))
	waitSeq(t, live.Catalog, seq)
	want, wantView := digestOf(t, live.Catalog), view(t, live.Catalog)
	live.stop(t)
	restarted := startReplica(t, env, dir, nil, nil)
	rebuilt := startReplica(t, env, "", nil, nil)
	for name, r := range map[string]*replica{"restarted": restarted, "rebuilt": rebuilt} {
		waitSeq(t, r.Catalog, seq)
		if got := digestOf(t, r.Catalog); got != want {
			t.Errorf("%s: digest differs from the live replica's", name)
		}
		if got := view(t, r.Catalog); got != wantView {
			t.Errorf("%s: answers differ:\n%s", name, firstDiff(got, wantView))
		}
		for _, tc := range []struct {
			pr    subjects.Principal
			name  string
			found bool
		}{
			{dave, "pay__get_bonus", true}, {carol, "pay__get_bonus", false},
			{carol, "pay__get_salary", false}, {dave, "pay__get_salary", false},
			{carol, "pay__late_tool", false}, {dave, "pay__evil", false}, {carol, "pay__evil", false},
		} {
			det := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{tc.name}, Principal: tc.pr})
			if (len(det.Tools) == 1) != tc.found {
				t.Errorf("%s: %s as %s: %d tools, %+v", name, tc.name, tc.pr.User, len(det.Tools), det.Error)
			}
			if !tc.found && det.Error != nil && det.Error.Reason == subjects.StateRemoved && tc.pr.User != carol.User {
				t.Errorf("%s: %s as %s: told removed, a tool of carol's context", name, tc.name, tc.pr.User)
			}
		}
	}
}
