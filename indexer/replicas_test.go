package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

var (
	verbs = []string{"create", "list", "delete", "update", "search", "get", "export", "archive", "close", "assign", "merge", "sync"}
	nouns = []string{"issue", "ticket", "invoice", "user", "report", "file", "page", "event", "order", "comment", "label", "alert"}
)

// history is a deterministic random registry history over a few servers: snapshots that add,
// change and drop tools, list_changed, confirmations (that answer the last list_changed, that
// predate it, or without afterSeq; the sequences assume the history is published first on an
// empty stream), status changes (including removal and return), revocations and malformed
// messages.
func history(seed uint64, n int) []any {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	servers := []string{"alpha", "beta", "gamma.io", "delta team", "epsilon", "数据"}
	var evs []any
	for _, s := range servers {
		evs = append(evs, status(s, subjects.StatusReady))
	}
	lastFP, lastChanged := map[string]string{}, map[string]uint64{}
	for i := range n {
		s := servers[rng.IntN(len(servers))]
		switch p := rng.IntN(100); {
		case p < 55:
			var items []json.RawMessage
			for j := range 12 {
				if rng.IntN(3) == 0 {
					continue
				}
				v, nn := verbs[j], nouns[(j+len(s))%len(nouns)]
				name := fmt.Sprintf("%s_%s", v, nn)
				if j%5 == 4 {
					name = fmt.Sprintf("%s.%s v%d", v, nn, j) // not plain: encoded public name
				}
				ann := `{"readOnlyHint":true}`
				if j%3 == 0 {
					ann = `{"destructiveHint":true}`
				}
				items = append(items, tool(name, fmt.Sprintf("%s one %s of %s (rev %d)", v, nn, s, rng.IntN(3)),
					"annotations", ann,
					"inputSchema", fmt.Sprintf(`{"type":"object","properties":{"%s_id":{"type":"string","description":"the %s"}}}`, nn, nn)))
			}
			sn := snapshot(s, fmt.Sprintf("The %s service (%d)", s, rng.IntN(2)), items...)
			sn.ListedAt = t0.Add(timeStep(i))
			if rng.IntN(4) == 0 {
				ttl := int64(30_000)
				sn.TTLMs = &ttl
			}
			evs = append(evs, sn)
			lastFP[s] = sn.Fingerprint
		case p < 65:
			evs = append(evs, changed(s))
			lastChanged[s] = uint64(len(evs))
		case p < 80:
			st := []string{subjects.StatusReady, subjects.StatusUnavailable, subjects.StatusConnecting, subjects.StatusRemoved}[rng.IntN(4)]
			evs = append(evs, status(s, st))
		case p < 90:
			v := verbs[rng.IntN(len(verbs))]
			nn := nouns[rng.IntN(len(nouns))]
			if rng.IntN(2) == 0 {
				evs = append(evs, revoke(s, []string{v + "_" + nn}, nil))
			} else {
				evs = append(evs, revoke(s, nil, []string{v + "_" + nn}))
			}
		case p < 95:
			cf := confirmed(s, lastFP[s], t0.Add(timeStep(i)))
			if cf.Fingerprint == "" {
				cf.Fingerprint = "none"
			}
			switch rng.IntN(3) {
			case 0:
				cf.AfterSeq = lastChanged[s] // answers it
			case 1:
				cf.AfterSeq = max(lastChanged[s], 1) - 1 // began before it
			}
			evs = append(evs, cf)
		default:
			evs = append(evs, rawEvent{subjects.RegistryStatus(s), []byte(fmt.Sprintf(`{"v":1,"type":"status","server":%d}`, i))})
		}
	}
	return evs
}

func timeStep(i int) time.Duration { return time.Duration(i) * time.Second }

// view is everything a replica answers for a fixed set of requests, as JSON.
func view(t testing.TB, c *Catalog) string {
	t.Helper()
	ctx := context.Background()
	var out []any
	for _, q := range []string{"create issue", "delete invoice", "list users of alpha", "export report", "数据 sync", "select:alpha__create_issue,beta__list_ticket"} {
		for _, all := range []bool{false, true} {
			rep := c.Search(ctx, subjects.SearchRequest{V: 1, Query: q, K: 100, Detail: subjects.DetailFull, IncludeUnavailable: all})
			// Ranking is the search package's business (and its scores may depend on the index's
			// history, see the report); what the catalog answers is the set of tools and their
			// entries.
			for i := range rep.Tools {
				rep.Tools[i].Score = 0
			}
			slices.SortFunc(rep.Tools, func(a, b subjects.ToolInfo) int { return strings.Compare(a.Name, b.Name) })
			out = append(out, rep)
		}
	}
	out = append(out, c.Servers(ctx, subjects.ServersRequest{V: 1}))
	var pubs []string
	c.mu.RLock()
	for p := range c.byPublic {
		pubs = append(pubs, p)
	}
	for p := range c.removed {
		pubs = append(pubs, p)
	}
	c.mu.RUnlock()
	out = append(out, c.Details(ctx, subjects.DetailsRequest{V: 1, Names: sortedUnique(pubs)}))
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedUnique(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	out := sortedKeys(m)
	if len(out) > MaxDetailNames {
		out = out[:MaxDetailNames]
	}
	return out
}

func digestOf(t testing.TB, c *Catalog) string {
	t.Helper()
	d, err := c.Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return d
}

// TestReplicasConverge: replicas started at different points (live, half-way, after the fact;
// on disk and in memory) converge to the same content; a replica with an empty directory
// rebuilds by replay to the same content; a restarted replica resumes from its sequence with
// the same in-memory answers it had.
func TestReplicasConverge(t *testing.T) {
	env := natstest.Start(t)
	evs := history(7, 400)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")

	a := startReplica(t, env, dirA, nil, nil)
	publish(t, env.JS, evs[:len(evs)/2]...)
	b := startReplica(t, env, dirB, nil, nil)
	last := publish(t, env.JS, evs[len(evs)/2:]...)
	c := startReplica(t, env, "", nil, nil)
	for _, r := range []*replica{a, b, c} {
		waitSeq(t, r.Catalog, last)
	}
	if a.Stats().BadEvents == 0 || a.Stats().Tools == 0 {
		t.Fatalf("history too tame: %+v", a.Stats())
	}
	wantDigest, wantView := digestOf(t, a.Catalog), view(t, a.Catalog)
	t.Logf("live replica: %+v; answers %d bytes", a.Stats(), len(wantView))
	for name, r := range map[string]*replica{"joined half-way": b, "replayed in memory": c} {
		if got := digestOf(t, r.Catalog); got != wantDigest {
			t.Errorf("%s: digest %s, want %s", name, got, wantDigest)
		}
		if got := view(t, r.Catalog); got != wantView {
			t.Errorf("%s: answers differ from the live replica's:\n%s", name, firstDiff(got, wantView))
		}
	}

	// Restart b: it resumes from its sequence, with the answers it had.
	b.stop(t)
	b2 := startReplica(t, env, dirB, nil, nil)
	if got := b2.Seq(); got != last {
		t.Errorf("restarted replica at seq %d, want %d", got, last)
	}
	waitSeq(t, b2.Catalog, last)
	if got := view(t, b2.Catalog); got != wantView {
		t.Errorf("restarted replica's answers differ:\n%s", firstDiff(got, wantView))
	}
	if got := b2.Stats().Applied; got != 0 {
		t.Errorf("restarted replica re-applied %d messages", got)
	}

	// More history: all follow, and a brand-new directory rebuilds to the same content.
	last = publish(t, env.JS, history(8, 100)...)
	d := startReplica(t, env, filepath.Join(t.TempDir(), "d"), nil, nil)
	for _, r := range []*replica{a, b2, c, d} {
		waitSeq(t, r.Catalog, last)
	}
	wantDigest, wantView = digestOf(t, a.Catalog), view(t, a.Catalog)
	for i, r := range []*replica{b2, c, d} {
		if got := digestOf(t, r.Catalog); got != wantDigest {
			t.Errorf("replica %d: digest differs", i)
		}
		if got := view(t, r.Catalog); got != wantView {
			t.Errorf("replica %d: answers differ:\n%s", i, firstDiff(got, wantView))
		}
	}
}

func firstDiff(got, want string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			lo := max(0, i-300)
			return fmt.Sprintf("at byte %d:\n got …%s…\nwant …%s…", i, got[lo:min(len(got), i+200)], want[lo:min(len(want), i+200)])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(got), len(want))
}

// TestStreamRecreated: a catalog built from a stream that was deleted and created again is
// dropped and rebuilt from the new stream.
func TestStreamRecreated(t *testing.T) {
	env := natstest.Start(t)
	dir := filepath.Join(t.TempDir(), "r")
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	r.stop(t)

	ctx := context.Background()
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	seq = publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
	r2 := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r2.Catalog, seq)
	waitFor(t, "the old catalog dropped", func() bool { return r2.Stats().Tools == 1 })
	if _, _, ok := r2.Lookup("solo__only_tool"); !ok {
		t.Error("new stream's tool missing")
	}
	if _, _, ok := r2.Lookup("kb__get_document"); ok {
		t.Error("old stream's tool survived")
	}
}

// TestStreamPurged: a replica restarted after the registry stream was purged drops what it built
// from the purged events, as a replica built now would not have it (it kept them, and replicas
// disagreed).
func TestStreamPurged(t *testing.T) {
	env := natstest.Start(t)
	dir := filepath.Join(t.TempDir(), "r")
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	r.stop(t)

	ctx := context.Background()
	s, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := startReplica(t, env, dir, nil, nil)
	waitFor(t, "the purged catalog dropped", func() bool { return r2.Ready() && r2.Stats().Tools == 0 })
	if _, _, ok := r2.Lookup("kb__get_document"); ok {
		t.Error("a purged stream's tool survived")
	}
	seq = publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
	waitSeq(t, r2.Catalog, seq)
	if _, _, ok := r2.Lookup("solo__only_tool"); !ok {
		t.Error("the tool published after the purge is missing")
	}
	r2.stop(t)

	// Purged, then events published before the replica restarts: the stream is not empty, and
	// the catalog still drops what it built from the purged events.
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	seq = publish(t, env.JS, status("other", subjects.StatusReady), snapshot("other", "", tool("new_tool", "a new tool")))
	r3 := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r3.Catalog, seq)
	if _, _, ok := r3.Lookup("solo__only_tool"); ok || r3.Stats().Tools != 1 {
		t.Errorf("purged tools survived a purge followed by new events: %d tools", r3.Stats().Tools)
	}
}

// TestStreamPurgedBehindPosition: a registry stream trimmed (purged up to a sequence, as `nats
// stream purge --seq` or `--keep` do) behind a replica's position lost events the replica was
// built from: a replica restarted on it kept what it built from them, while a replica built now
// has none of it, so the two answered differently. It drops its catalog and rebuilds, as it
// does when the purge reaches past its position (TestStreamPurged).
func TestStreamPurgedBehindPosition(t *testing.T) {
	env := natstest.Start(t)
	dir := filepath.Join(t.TempDir(), "r")
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	r.stop(t)

	ctx := context.Background()
	s, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil { // keeps 3..seq
		t.Fatal(err)
	}
	seq = publish(t, env.JS, status("solo", subjects.StatusReady), snapshot("solo", "", tool("only_tool", "the only tool")))
	restarted := startReplica(t, env, dir, nil, nil)
	fresh := startReplica(t, env, "", nil, nil)
	for _, c := range []*replica{restarted, fresh} {
		waitSeq(t, c.Catalog, seq)
	}
	if got, want := digestOf(t, restarted.Catalog), digestOf(t, fresh.Catalog); got != want {
		t.Errorf("restarted replica (%d tools) differs from one built from the trimmed stream (%d tools)",
			restarted.Stats().Tools, fresh.Stats().Tools)
	}
	if got, want := view(t, restarted.Catalog), view(t, fresh.Catalog); got != want {
		t.Errorf("answers differ:\n%s", firstDiff(got, want))
	}
}
