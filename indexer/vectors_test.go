package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// conceptEmbedder is a deterministic Embedder for tests: one dimension per concept, a text's
// vector counts the words of each concept it holds. Words of one concept share no letters, so
// only vectors can relate them (what a real embedding model does for synonyms).
type conceptEmbedder struct {
	mu     sync.Mutex
	fail   bool
	calls  atomic.Int64 // Embed calls
	texts  atomic.Int64 // texts embedded, but for the probe's
	probes atomic.Int64 // probe texts embedded (with each batch and request, see embedInSpace)
}

var concepts = [][]string{
	{"weather", "forecast", "rain", "umbrella", "sunny", "temperature"},
	{"ticket", "issue", "incident", "outage"},
	{"money", "invoice", "payment", "refund"},
	{"document", "policy", "handbook"},
}

func (e *conceptEmbedder) Name() string { return "concepts-v1" }

func (e *conceptEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	fail := e.fail
	e.mu.Unlock()
	e.calls.Add(1)
	if fail {
		return nil, errors.New("embedder down")
	}
	for _, t := range texts {
		switch t {
		case probeText:
			e.probes.Add(1)
		case probeContrastText: // with the probe, when the space is probed
		default:
			e.texts.Add(1)
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(concepts)+1)
		v[len(concepts)] = 0.05 // never all zero
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return r < 'a' || r > 'z' }) {
			for c, words := range concepts {
				if slices.Contains(words, w) {
					v[c]++
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

func (e *conceptEmbedder) setFail(f bool) {
	e.mu.Lock()
	e.fail = f
	e.mu.Unlock()
}

// hybridEvents: a weather server whose tool shares no word with "will it rain tomorrow".
func hybridEvents() []any {
	return []any{
		status("meteo", subjects.StatusReady),
		snapshot("meteo", "Meteorological data",
			tool("get_outlook", "Temperature outlook for a city, sunny or not.", "inputSchema", `{"type":"object","properties":{"city":{"type":"string"}}}`),
		),
		status("desk", subjects.StatusReady),
		snapshot("desk", "Service desk",
			tool("open_incident", "Opens an incident for an outage."),
			tool("list_incidents", "Lists incidents."),
		),
	}
}

func waitVectors(t testing.TB, c *Catalog, n int) {
	t.Helper()
	waitFor(t, "vectors attached", func() bool {
		st := c.Stats()
		return st.Vectors == n && st.VectorsPending == 0
	})
}

// TestHybridSearch: with an Embedder a request finds a tool it shares no word with, through
// vectors; without one the same request finds nothing (the lexical floor).
func TestHybridSearch(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &conceptEmbedder{}
	hybrid := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	lexical := startReplicaConfig(t, env, Config{}, nil)
	waitSeq(t, hybrid.Catalog, seq)
	waitSeq(t, lexical.Catalog, seq)
	waitVectors(t, hybrid.Catalog, 3)

	const q = "will it rain tomorrow"
	lex := find(t, lexical.Catalog, q)
	if got := names(lex.Tools); len(got) != 0 {
		t.Errorf("lexical: %v, want nothing (no shared word)", got)
	}
	if lex.Ranking != subjects.RankingLexical {
		t.Errorf("without an embedder: ranking %q, want %q", lex.Ranking, subjects.RankingLexical)
	}
	rep := find(t, hybrid.Catalog, q)
	mustNoErr(t, rep.Error)
	if got := names(rep.Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("hybrid: %v, want meteo__get_outlook first", got)
	}
	if rep.Ranking != subjects.RankingHybrid {
		t.Errorf("with vectors: ranking %q, want %q", rep.Ranking, subjects.RankingHybrid)
	}
	if sel := find(t, hybrid.Catalog, "select:meteo__get_outlook"); sel.Ranking != subjects.RankingSelect || len(sel.Tools) != 1 {
		t.Errorf("select: ranking %q, %d tools, want %q and one", sel.Ranking, len(sel.Tools), subjects.RankingSelect)
	}
	// A repeated request is embedded once (the request cache).
	calls := emb.calls.Load()
	find(t, hybrid.Catalog, q)
	if got := emb.calls.Load(); got != calls {
		t.Errorf("a repeated request called the embedder %d more times", got-calls)
	}
	// Lexical matches still lead where they exist.
	if got := names(find(t, hybrid.Catalog, "list incidents").Tools); len(got) == 0 || got[0] != "desk__list_incidents" {
		t.Errorf("hybrid, lexical query: %v", got)
	}
	// Vectors are derived data: the replicas hold the same content.
	d1, err1 := hybrid.Digest()
	d2, err2 := lexical.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Errorf("digests differ: %s %v / %s %v", d1, err1, d2, err2)
	}
}

// TestHybridSearchPermissions: a tool the principal may not call never comes in through vectors.
func TestHybridSearchPermissions(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Roles: []string{"desk"}}},
		Rules:      []policy.Rule{{Name: "desk", Roles: []string{"desk"}, Allow: []string{"desk__*"}}},
	})
	r := startReplicaConfig(t, env, Config{Embedder: &conceptEmbedder{}, Policy: pol}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	for _, k := range []int{1, 5, 50} {
		rep := find(t, r.Catalog, "will it rain tomorrow, umbrella or sunny", as(subjects.Principal{User: "alice"}), func(r *subjects.SearchRequest) { r.K = k })
		mustNoErr(t, rep.Error)
		if slices.Contains(names(rep.Tools), "meteo__get_outlook") {
			t.Errorf("k=%d: a denied tool came in through vectors: %v", k, names(rep.Tools))
		}
	}
}

// TestHybridSearchEmbedderDown: search stays lexical while the embedder fails; the vectors come
// once it recovers; a restarted replica takes them from its cache, not the embedder.
func TestHybridSearchEmbedderDown(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &conceptEmbedder{}
	emb.setFail(true)
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplicaConfig(t, env, Config{Dir: dir, Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitFor(t, "an embedder error", func() bool { return r.Stats().EmbedErrors > 0 })
	if st := r.Stats(); st.Vectors != 0 || st.VectorsPending != 3 {
		t.Errorf("stats while down: %+v", st)
	}
	down := find(t, r.Catalog, "list incidents")
	if got := names(down.Tools); len(got) == 0 || got[0] != "desk__list_incidents" {
		t.Errorf("lexical search while the embedder is down: %v", got)
	}
	if down.Ranking != subjects.RankingLexical {
		t.Errorf("while the embedder is down: ranking %q, want %q (the reply says search was not hybrid)", down.Ranking, subjects.RankingLexical)
	}
	emb.setFail(false)
	waitVectors(t, r.Catalog, 3)
	embedded := emb.texts.Load()
	r.stop(t)

	again := startReplicaConfig(t, env, Config{Dir: dir, Embedder: emb}, nil)
	waitSeq(t, again.Catalog, seq)
	waitVectors(t, again.Catalog, 3)
	if got := emb.texts.Load(); got != embedded {
		t.Errorf("restart embedded %d texts again, want the probe alone (cache)", got-embedded)
	}
	if got := names(find(t, again.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("after restart: %v", got)
	}
	// A changed description gets a new vector; a removed tool's is forgotten.
	seq = publish(t, env.JS, snapshot("meteo", "Meteorological data",
		tool("get_outlook", "Invoice totals for a month.")))
	waitSeq(t, again.Catalog, seq)
	waitVectors(t, again.Catalog, 3)
	if got := names(find(t, again.Catalog, "refund payment").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("after the description changed: %v", got)
	}
}

func TestVecCache(t *testing.T) {
	var vc vecCache
	if _, ok := vc.get("a"); ok {
		t.Fatal("empty cache hit")
	}
	for i := range queryCacheSize {
		vc.put(fmt.Sprint(i), []float32{float32(i)})
	}
	vc.get("0") // most recent now: "1" is the oldest
	vc.put("new", []float32{-1})
	if _, ok := vc.get("1"); ok {
		t.Error("the least recently used entry stayed")
	}
	for _, k := range []string{"0", "2", "new"} {
		if _, ok := vc.get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if vc.order.Len() != queryCacheSize || len(vc.byKey) != queryCacheSize {
		t.Errorf("size %d/%d, want %d", vc.order.Len(), len(vc.byKey), queryCacheSize)
	}
}

// TestHybridManyTools: hundreds of tools are embedded in batches and every one gets its vector.
func TestHybridManyTools(t *testing.T) {
	env := natstest.Start(t)
	var items []json.RawMessage
	for i := range 500 {
		items = append(items, tool(fmt.Sprintf("t%03d", i), fmt.Sprintf("Tool %d about %s.", i, concepts[i%len(concepts)][i%3])))
	}
	seq := publish(t, env.JS, status("many", subjects.StatusReady), snapshot("many", "Many tools", items...))
	emb := &conceptEmbedder{}
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplicaConfig(t, env, Config{Dir: dir, Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 500)
	if got := emb.texts.Load(); got != 500 {
		t.Errorf("embedded %d texts, want 500", got)
	}
	if calls, probes := emb.calls.Load(), emb.probes.Load(); calls < 1+8 || probes != calls { // 500 / 63
		t.Errorf("%d embed calls, %d probes: want batches of at most 63 texts, each with the probe", calls, probes)
	}
	if st := r.Stats(); st.BadVectors != 0 || st.EmbedErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// hangingEmbedder answers the tools' texts, then, once hang is set, blocks every call until its
// context ends (an endpoint that accepts connections and never answers).
type hangingEmbedder struct {
	conceptEmbedder
	hang  atomic.Bool
	calls atomic.Int64 // calls while hanging
}

func (e *hangingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.hang.Load() {
		e.calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return e.conceptEmbedder.Embed(ctx, texts)
}

// TestHybridSearchEmbedderHangs: once a request embedding failed, searches are lexical at once
// for a while instead of each waiting the embed timeout; the embedder is tried again after it.
func TestHybridSearchEmbedderHangs(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &hangingEmbedder{}
	r := startReplicaConfig(t, env, Config{Dir: filepath.Join(t.TempDir(), "r"), Embedder: emb, EmbedTimeout: 20 * time.Millisecond}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	r.Catalog.mu.Lock()
	r.Catalog.embedRetryMin = time.Hour // no second try within the test's searches
	r.Catalog.mu.Unlock()
	emb.hang.Store(true)
	for i := range 5 {
		if got := names(find(t, r.Catalog, fmt.Sprintf("list incidents %d", i)).Tools); len(got) == 0 || got[0] != "desk__list_incidents" {
			t.Fatalf("lexical search while the embedder hangs: %v", got)
		}
	}
	if n := emb.calls.Load(); n != 1 {
		t.Errorf("the hanging embedder was asked %d times in 5 searches, want once", n)
	}
	// The hold-off over, the next search tries it again; a success resets it.
	emb.hang.Store(false)
	r.Catalog.embedDown.until.Store(0)
	if got := names(find(t, r.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
		t.Errorf("after the embedder recovered: %v", got)
	}
	if r.Catalog.embedDown.wait.Load() != 0 {
		t.Error("a success did not reset the hold-off")
	}
}

// rotatedEmbedder is conceptEmbedder's model replaced under the same name: the same texts get
// other vectors (the concepts' dimensions rotated), of dims dimensions (0: the same number).
type rotatedEmbedder struct {
	conceptEmbedder
	dims int
}

func (e *rotatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.conceptEmbedder.Embed(ctx, texts)
	for i, v := range vecs {
		out := make([]float32, max(e.dims, len(v)))
		for d := range v {
			out[(d+1)%len(v)] = v[d]
		}
		for d := len(v); d < len(out); d++ {
			out[d] = 0.01
		}
		vecs[i] = out
	}
	return vecs, err
}

// TestHybridModelSwappedUnderSameName: the vector cache is keyed by the embedder's name, which
// does not change when another model answers under it (an Ollama tag pulled again, a gateway
// alias moved). Its cached vectors must not meet the new model's: a restarted replica used to
// attach the old vectors and embed the requests with the new model (a ranking of unrelated
// spaces), or, with another dimension, to refuse every new vector and ignore every request's.
func TestHybridModelSwappedUnderSameName(t *testing.T) {
	for _, dims := range []int{0, 8} {
		t.Run(fmt.Sprintf("dims=%d", dims), func(t *testing.T) {
			env := natstest.Start(t)
			seq := publish(t, env.JS, hybridEvents()...)
			dir := filepath.Join(t.TempDir(), "r")
			r := startReplicaConfig(t, env, Config{Dir: dir, Embedder: &conceptEmbedder{}}, nil)
			waitSeq(t, r.Catalog, seq)
			waitVectors(t, r.Catalog, 3)
			r.stop(t)

			swapped := &rotatedEmbedder{dims: dims}
			again := startReplicaConfig(t, env, Config{Dir: dir, Embedder: swapped}, nil)
			waitSeq(t, again.Catalog, seq)
			waitVectors(t, again.Catalog, 3)
			if got := swapped.texts.Load(); got != 3 {
				t.Errorf("the new model embedded %d texts, want the 3 tools' again", got)
			}
			if st := again.Stats(); st.BadVectors != 0 {
				t.Errorf("stats %+v: vectors refused", st)
			}
			if got := names(find(t, again.Catalog, "will it rain tomorrow").Tools); len(got) == 0 || got[0] != "meteo__get_outlook" {
				t.Errorf("hybrid search after the swap: %v, want meteo__get_outlook first", got)
			}
			// The same model again: the cache serves (the probe alone is embedded).
			again.stop(t)
			before := swapped.texts.Load()
			third := startReplicaConfig(t, env, Config{Dir: dir, Embedder: swapped}, nil)
			waitSeq(t, third.Catalog, seq)
			waitVectors(t, third.Catalog, 3)
			if got := swapped.texts.Load() - before; got != 0 {
				t.Errorf("a restart with the same model embedded %d texts, want the probe alone", got)
			}
		})
	}
}

// TestQueryCacheNotSharedAcrossPrincipals: the request cache is read before the endpoint's
// hold-off, so a query cached for one principal ranked hybrid for another while the endpoint
// was down, where any other query was lexical: one tenant could confirm another's exact query.
func TestQueryCacheNotSharedAcrossPrincipals(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &conceptEmbedder{}
	r := startReplicaConfig(t, env, Config{Embedder: emb}, nil)
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	const q = "will it rain tomorrow"
	alice := subjects.Principal{Tenant: "acme", User: "alice"}
	if rep := find(t, r.Catalog, q, as(alice)); rep.Ranking != subjects.RankingHybrid {
		t.Fatalf("alice's search: ranking %q, want %q", rep.Ranking, subjects.RankingHybrid)
	}
	emb.setFail(true)
	for _, pr := range []subjects.Principal{{Tenant: "globex", User: "alice"}, {Tenant: "acme", User: "bob"}} {
		if rep := find(t, r.Catalog, q, as(pr)); rep.Ranking != subjects.RankingLexical {
			t.Errorf("%+v, with the endpoint down: ranking %q, want %q (another principal's cached query)", pr, rep.Ranking, subjects.RankingLexical)
		}
	}
	if rep := find(t, r.Catalog, q, as(alice)); rep.Ranking != subjects.RankingHybrid {
		t.Errorf("alice again, her own query cached: ranking %q, want %q", rep.Ranking, subjects.RankingHybrid)
	}
}
