package search

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// hashVector is a stand-in embedding for tests: the words of text hashed
// into dims signed buckets, plus a component common to every text (real
// embeddings share one too, so that unrelated texts have cosines around 0.1
// to 0.3 rather than 0). Texts sharing words are close; others are not.
func hashVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	toks := Tokenize(text)
	for _, t := range toks {
		h := fnv.New64a()
		h.Write([]byte(t))
		x := h.Sum64()
		if x>>63 == 1 {
			v[x%uint64(dims)]--
		} else {
			v[x%uint64(dims)]++
		}
	}
	common := float32(0.4 * math.Sqrt(float64(len(toks))/float64(dims)))
	for i := range v {
		v[i] += common
	}
	return v
}

func docText(d Doc) string {
	return d.Server + " " + d.Name + " " + d.Title + " " + d.Description + " " + d.ServerDescription
}

// cosine of a and b, in float64.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// checkVectors verifies the vector store's invariants, and that each tool
// of want (public name → vector as given) has that vector, normalized, and
// the others none.
func checkVectors(t *testing.T, ix *Index, want map[string][]float32) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	vs := &ix.vecs
	if len(vs.data) != len(vs.slots)*vs.dims || (vs.dims == 0) != (len(vs.slots) == 0) {
		t.Fatalf("store: %d floats, %d rows, %d dims", len(vs.data), len(vs.slots), vs.dims)
	}
	if len(vs.slots) != len(want) {
		t.Errorf("%d rows, want %d", len(vs.slots), len(want))
	}
	for r, s := range vs.slots {
		if int(s) >= len(ix.docs) || !ix.alive(s) || ix.docs[s].vec != uint32(r+1) {
			t.Fatalf("row %d: slot %d misaligned", r, s)
		}
	}
	for slot, rec := range ix.docs {
		w, ok := want[rec.id]
		if !ix.alive(uint32(slot)) {
			if rec.vec != 0 {
				t.Errorf("dead slot %d has a vector", slot)
			}
			continue
		}
		if !ok {
			if rec.vec != 0 {
				t.Errorf("%s has a vector, want none", rec.id)
			}
			continue
		}
		if rec.vec == 0 {
			t.Errorf("%s has no vector", rec.id)
			continue
		}
		r := int(rec.vec - 1)
		got := vs.data[r*vs.dims : (r+1)*vs.dims]
		if len(got) != len(w) || math.Abs(cosine(got, w)-1) > 1e-6 || math.Abs(norm(got)-1) > 1e-6 {
			t.Errorf("%s: stored %v, want %v normalized", rec.id, got, w)
		}
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// vecCatalog is a small catalog with 4-dim vectors: axis 0 is "vehicles",
// 1 "weather", 2 "code hosting", 3 "files".
func vecCatalog() ([]Doc, map[string][]float32) {
	docs := smallCatalog()
	vecs := map[string][]float32{
		"github__create_issue":  {0, 0, 1, 0.1},
		"github__list_issues":   {0, 0, 1, 0},
		"gitlab__create_issue":  {0, 0, 0.9, 0.1},
		"weather__get_forecast": {0, 1, 0, 0},
		"fs__write_file":        {0, 0, 0.1, 1},
		"fs__read_file":         {0, 0, 0, 1},
	}
	docs = append(docs,
		// No word in common with "automobile hire" or "motorcar".
		Doc{ID: "cars__book_rental", Server: "cars", ServerDescription: "Rent-a-car agency.",
			Name: "book_rental", Description: "Reserve a vehicle for given dates."},
		Doc{ID: "cars__fleet", Server: "cars", ServerDescription: "Rent-a-car agency.",
			Name: "fleet", Description: "List the vehicles available at an agency."},
		// Barely related: cosine about 0.2 with axis 0.
		Doc{ID: "bikes__rent", Server: "bikes", ServerDescription: "City bicycles.",
			Name: "rent", Description: "Unlock a bicycle."},
	)
	vecs["cars__book_rental"] = []float32{1, 0, 0, 0.2}
	vecs["cars__fleet"] = []float32{0.8, 0.1, 0, 0.2}
	vecs["bikes__rent"] = []float32{0.2, 0.3, 0.6, 0.7}
	for i := range docs {
		docs[i].Vector = vecs[docs[i].ID]
	}
	return docs, vecs
}

func newVec(t testing.TB, cfg Config) (*Index, map[string][]float32) {
	t.Helper()
	docs, vecs := vecCatalog()
	ix := New(cfg)
	for _, d := range docs {
		ix.Upsert(d)
	}
	return ix, vecs
}

func TestVectorOnlyMatch(t *testing.T) {
	ix, vecs := newVec(t, Config{})
	checkVectors(t, ix, vecs)
	if n, dims := ix.Vectors(); n != len(vecs) || dims != 4 {
		t.Fatalf("Vectors() = %d, %d, want %d, 4", n, dims, len(vecs))
	}
	q := Query{Text: "automobile hire", Vector: []float32{1, 0, 0, 0}}
	if hits := ix.Search(Query{Text: q.Text}); len(hits) != 0 {
		t.Fatalf("lexical: %v, want nothing (no shared word)", ids(hits))
	}
	hits := ix.Search(q)
	if !slices.Equal(ids(hits), []string{"cars__book_rental", "cars__fleet"}) {
		t.Errorf("with a vector: %v, want the two car tools (and not bikes__rent, under MinCosine)", ids(hits))
	}
	if len(hits) == 2 {
		if w := 1.0 / 61; hits[0].Score != w || hits[1].Score != 1.0/62 {
			t.Errorf("scores %v, want 1/61 and 1/62 (vector ranks 1 and 2, no lexical rank)", hits)
		}
	}
	// A vector alone (no text) works too; with the floor lowered, the
	// bicycle comes in.
	if got := ids(ix.Search(Query{Vector: q.Vector})); !slices.Equal(got, []string{"cars__book_rental", "cars__fleet"}) {
		t.Errorf("vector only: %v", got)
	}
	low, _ := newVec(t, Config{MinCosine: 0.1})
	if got := ids(low.Search(q)); !slices.Equal(got, []string{"cars__book_rental", "cars__fleet", "bikes__rent"}) {
		t.Errorf("MinCosine 0.1: %v", got)
	}
	// A lexical match and a vector match are fused: "weather" matches
	// get_forecast by its words; the vector points at vehicles.
	got := ids(ix.Search(Query{Text: "weather for my road trip", Vector: q.Vector}))
	if len(got) < 3 || !slices.Contains(got[:3], "weather__get_forecast") || !slices.Contains(got[:3], "cars__book_rental") {
		t.Errorf("fused: %v, want the forecast and the rental near the top", got)
	}
	// Vectors switched off: lexical only.
	off, _ := newVec(t, Config{VectorWeight: -1})
	if hits := off.Search(q); len(hits) != 0 {
		t.Errorf("VectorWeight < 0: %v, want nothing", ids(hits))
	}
	if hits := off.Search(Query{Vector: q.Vector}); len(hits) != 0 {
		t.Errorf("VectorWeight < 0, no text: %v, want nothing", ids(hits))
	}
}

// TestVectorFusionRule checks the fused scores against the formula.
func TestVectorFusionRule(t *testing.T) {
	for _, w := range []float64{0, 0.5, 2} {
		ix, vecs := newVec(t, Config{VectorWeight: w, MinCosine: 0.05})
		wantW := w
		if w == 0 {
			wantW = 1
		}
		qv := []float32{0.5, 0.2, 0.8, 0.3}
		const text = "create an issue or list the issues of a repository, or write a file"
		lex := ix.Search(Query{Text: text, K: 200})
		type cv struct {
			id  string
			cos float64
		}
		var byCos []cv
		for id, v := range vecs {
			if c := cosine(qv, v); c >= 0.05 {
				byCos = append(byCos, cv{id, c})
			}
		}
		slices.SortFunc(byCos, func(a, b cv) int {
			if a.cos != b.cos {
				if a.cos > b.cos {
					return -1
				}
				return 1
			}
			return 0
		})
		want := map[string]float64{}
		lexScore := map[string]float64{}
		for i, h := range lex {
			want[h.ID] += 1 / float64(60+i+1)
			lexScore[h.ID] = h.Score
		}
		for j, c := range byCos {
			want[c.id] += wantW / float64(60+j+1)
		}
		var order []string
		for id := range want {
			order = append(order, id)
		}
		slices.SortFunc(order, func(a, b string) int {
			switch {
			case want[a] != want[b]:
				if want[a] > want[b] {
					return -1
				}
				return 1
			case lexScore[a] != lexScore[b]:
				if lexScore[a] > lexScore[b] {
					return -1
				}
				return 1
			case a < b:
				return -1
			}
			return 1
		})
		hits := ix.Search(Query{Text: text, K: 200, Vector: qv})
		if !slices.Equal(ids(hits), order) {
			t.Errorf("w=%v: fused %v, want %v", w, ids(hits), order)
			continue
		}
		for _, h := range hits {
			if math.Abs(h.Score-want[h.ID]) > 1e-12 {
				t.Errorf("w=%v: %s scores %v, want %v", w, h.ID, h.Score, want[h.ID])
			}
		}
	}
}

// TestVectorTies: tools equally far from the query and not found by their
// words are ordered by ID.
func TestVectorTies(t *testing.T) {
	ix := New(Config{})
	for _, id := range []string{"c__same", "a__same", "b__same", "d__other"} {
		ix.Upsert(Doc{ID: id, Server: "srv", Name: "same", Description: "Identical tool text.", Vector: []float32{1, 1}})
	}
	for range 3 {
		if got := ids(ix.Search(Query{Vector: []float32{2, 2}, K: 3})); !slices.Equal(got, []string{"a__same", "b__same", "c__same"}) {
			t.Fatalf("got %v", got)
		}
	}
}

// TestVectorPinned: exact mentions and the tool of a file operation keep
// their places at the head of a fused ranking, even when the query vector
// points at the tool that follows them, which the fusion would put first.
func TestVectorPinned(t *testing.T) {
	tests := []struct {
		q      string
		first  string
		pinned int // places at the head of the lexical ranking
	}{
		{"get the weather forecast for Paris and save it to /root/notes/paris.md", "fs2__save_file", 1},
		{"open /var/log/app.log and create an issue about the errors", "fs__read_file", 1},
		{"github__list_issues then write them to issues.txt", "github__list_issues", 2},
		{"use gitlab__create_issue", "gitlab__create_issue", 1},
	}
	for _, tt := range tests {
		ix, _ := newVec(t, Config{})
		ix.Upsert(Doc{ID: "fs2__save_file", Server: "fs2", ServerDescription: "Another filesystem.",
			Name: "save_file", Description: "Save text to disk.", Vector: []float32{0, 0, 0, 1}})
		lex := ids(ix.Search(Query{Text: tt.q, K: 50}))
		if len(lex) <= tt.pinned || lex[0] != tt.first {
			t.Fatalf("%q lexical: %v, want %s first", tt.q, lex, tt.first)
		}
		next := lex[tt.pinned]
		ix.SetVector(next, []float32{1, 0, 0, 0.01}) // the query vector's best match
		hits := ix.Search(Query{Text: tt.q, K: 50, Vector: []float32{1, 0, 0, 0}})
		got := ids(hits)
		want := append(slices.Clone(lex[:tt.pinned]), next)
		if len(got) <= tt.pinned || !slices.Equal(got[:tt.pinned+1], want) {
			t.Errorf("%q fused: %v, want %v first", tt.q, got, want)
		}
		if !slices.Contains(got, "cars__book_rental") {
			t.Errorf("%q fused: %v, want the vector match in it", tt.q, got)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Errorf("%q: scores not decreasing: %v", tt.q, hits)
			}
		}
		for i := range tt.pinned {
			if hits[i].Score <= hits[i+1].Score {
				t.Errorf("%q: pinned %s does not score above the rest: %v", tt.q, hits[i].ID, hits)
			}
		}
	}
}

func TestVectorAllow(t *testing.T) {
	ix, _ := newVec(t, Config{VectorCandidates: 2})
	qv := []float32{1, 0, 0, 0}
	// The best vector match is denied: it neither appears nor takes one of
	// the two vector candidate places.
	for _, text := range []string{"", "automobile hire", "create an issue"} {
		calls := map[string]int{}
		allow := func(id string) bool { calls[id]++; return id != "cars__book_rental" }
		low := New(Config{VectorCandidates: 2, MinCosine: 0.1})
		docs, _ := vecCatalog()
		for _, d := range docs {
			low.Upsert(d)
		}
		got := low.Search(Query{Text: text, Vector: qv, Allow: allow, K: 5})
		if slices.Contains(ids(got), "cars__book_rental") {
			t.Errorf("%q: denied tool returned: %v", text, ids(got))
		}
		for id, n := range calls {
			if n > 1 {
				t.Errorf("%q: Allow ran %d times for %s", text, n, id)
			}
		}
		if !slices.Contains(ids(got), "bikes__rent") {
			t.Errorf("%q: %v, want bikes__rent among the two vector candidates", text, ids(got))
		}
		// Same as if the denied tool had no vector.
		low.SetVector("cars__book_rental", nil)
		if want := low.Search(Query{Text: text, Vector: qv, Allow: allow, K: 5}); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v (as without the denied tool's vector)", text, got, want)
		}
	}
	// Deny all: nothing.
	if hits := ix.Search(Query{Text: "automobile", Vector: qv, Allow: func(string) bool { return false }}); len(hits) != 0 {
		t.Errorf("deny-all: %v", ids(hits))
	}
	// K places go to allowed tools only.
	ix, _ = newVec(t, Config{})
	hits := ix.Search(Query{Vector: []float32{1, 0, 1, 0}, K: 3, Allow: func(id string) bool { return id != "github__list_issues" }})
	if len(hits) != 3 || slices.Contains(ids(hits), "github__list_issues") {
		t.Errorf("K=3 with a denied candidate: %v", ids(hits))
	}
}

func TestVectorDimensions(t *testing.T) {
	ix, vecs := newVec(t, Config{})
	const text = "create an issue on github"
	lex := ix.Search(Query{Text: text})
	// A query vector of another dimension is ignored: the lexical results,
	// scores included.
	for _, v := range [][]float32{{1, 0, 0}, {1, 0, 0, 0, 0}, {0, 0, 0, 0}, {float32(math.NaN()), 1, 0, 0}, {}} {
		if got := ix.Search(Query{Text: text, Vector: v}); !slices.Equal(got, lex) {
			t.Errorf("query vector %v: %v, want %v", v, got, lex)
		}
		if got := ix.Search(Query{Vector: v}); got != nil {
			t.Errorf("query vector %v alone: %v, want nothing", v, got)
		}
	}
	// Vectors of another dimension are refused.
	if ix.SetVector("weather__get_forecast", []float32{1, 2, 3}) {
		t.Error("SetVector of another dimension accepted")
	}
	ix.Upsert(Doc{ID: "new__tool", Server: "new", Name: "tool", Vector: []float32{1, 2, 3}})
	checkVectors(t, ix, vecs)
	// An index without vectors ignores query vectors.
	plain := newSmall(t)
	if got := plain.Search(Query{Text: text, Vector: []float32{1, 0, 0, 0}}); !slices.Equal(got, newSmall(t).Search(Query{Text: text})) {
		t.Errorf("no vectors: %v", got)
	}
}

func TestVectorSemantics(t *testing.T) {
	ix := newSmall(t)
	want := map[string][]float32{}
	if n, dims := ix.Vectors(); n != 0 || dims != 0 {
		t.Fatalf("Vectors() = %d, %d", n, dims)
	}
	// Unknown tool; unusable vectors.
	if ix.SetVector("no__such", []float32{1, 0}) || ix.SetVector("no__such", nil) {
		t.Error("SetVector of an unknown tool succeeded")
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, v := range [][]float32{{}, {0, 0, 0}, {1, nan, 0}, {inf, 1, 0}, {-inf, 0, 0}} {
		if ix.SetVector("fs__read_file", v) {
			t.Errorf("SetVector(%v) accepted", v)
		}
		ix.Upsert(Doc{ID: "extra__tool", Server: "extra", Name: "tool", Vector: v})
	}
	checkVectors(t, ix, want)
	// The first vector fixes the dimension; it is normalized.
	if !ix.SetVector("fs__read_file", []float32{3, 4, 0}) {
		t.Fatal("SetVector refused")
	}
	want["fs__read_file"] = []float32{3, 4, 0}
	if !ix.SetVector("fs__write_file", []float32{1e-30, 0, 0}) { // tiny, not zero
		t.Fatal("SetVector refused a tiny vector")
	}
	want["fs__write_file"] = []float32{1, 0, 0}
	checkVectors(t, ix, want)
	if n, dims := ix.Vectors(); n != 2 || dims != 3 {
		t.Errorf("Vectors() = %d, %d, want 2, 3", n, dims)
	}
	// Replace (a refused call changes nothing).
	if !ix.SetVector("fs__read_file", []float32{0, 0, 2}) || ix.SetVector("fs__read_file", []float32{0, 0}) || ix.SetVector("fs__read_file", []float32{0, 0, 0}) {
		t.Error("replace")
	}
	want["fs__read_file"] = []float32{0, 0, 1}
	checkVectors(t, ix, want)
	// The caller's slice is copied.
	v := []float32{1, 1, 0}
	ix.SetVector("weather__get_forecast", v)
	v[2] = 100
	want["weather__get_forecast"] = []float32{1, 1, 0}
	checkVectors(t, ix, want)
	// Upsert with a vector replaces it, without one drops it.
	d := smallCatalog()[4] // weather__get_forecast
	d.Vector = []float32{0, 5, 5}
	ix.Upsert(d)
	want["weather__get_forecast"] = d.Vector
	checkVectors(t, ix, want)
	d.Vector = nil
	ix.Upsert(d)
	delete(want, "weather__get_forecast")
	checkVectors(t, ix, want)
	// nil removes; Remove drops.
	if !ix.SetVector("fs__write_file", nil) || !ix.SetVector("fs__write_file", nil) {
		t.Error("SetVector(nil) of a known tool returned false")
	}
	delete(want, "fs__write_file")
	ix.Remove("fs__read_file")
	delete(want, "fs__read_file")
	checkVectors(t, ix, want)
	// No vector left: the dimension is free again.
	if n, dims := ix.Vectors(); n != 0 || dims != 0 {
		t.Errorf("Vectors() = %d, %d, want 0, 0", n, dims)
	}
	d.Vector = []float32{1, 2}
	ix.Upsert(d) // a 2-dim vector is accepted now
	want["weather__get_forecast"] = d.Vector
	if !ix.SetVector("github__create_issue", []float32{2, 1}) {
		t.Error("2-dim vector refused")
	}
	want["github__create_issue"] = []float32{2, 1}
	checkVectors(t, ix, want)
	// Replacing the only vector by one of another dimension: Upsert
	// replaces the tool (its old vector goes with it), SetVector refuses.
	if ix.SetVector("github__create_issue", []float32{1, 2, 3}) {
		t.Error("SetVector of another dimension accepted")
	}
	// ResetVectors drops them all, and frees the dimension.
	ix.ResetVectors()
	clear(want)
	checkVectors(t, ix, want)
	if n, dims := ix.Vectors(); n != 0 || dims != 0 {
		t.Errorf("after ResetVectors: %d, %d", n, dims)
	}
	d.Vector = []float32{1, 2, 3, 4, 5}
	ix.Upsert(d)
	want[d.ID] = d.Vector
	checkVectors(t, ix, want)
	if hits := ix.Search(Query{Vector: []float32{1, 2, 3, 4, 5}}); len(hits) != 1 || hits[0].ID != d.ID {
		t.Errorf("got %v", hits)
	}
}

// TestVectorCompaction churns tools with vectors so that slots are
// reclaimed, and checks that the vectors follow their tools.
func TestVectorCompaction(t *testing.T) {
	ix := New(Config{})
	want := map[string][]float32{}
	rng := rand.New(rand.NewSource(1))
	randVec := func() []float32 {
		v := make([]float32, 8)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for i := range 6000 {
		id := fmt.Sprintf("tmp__t%d", i)
		d := Doc{ID: id, Server: fmt.Sprintf("tmp%d", i%7), Name: fmt.Sprintf("t%d", i), Description: "ephemeral"}
		if i%5 != 0 {
			d.Vector = randVec()
			want[id] = d.Vector
		}
		ix.Upsert(d)
	}
	compactions := 0
	for i := range 6000 {
		if i%10 == 3 {
			continue // stays
		}
		before := len(ix.docs)
		id := fmt.Sprintf("tmp__t%d", i)
		ix.Remove(id)
		delete(want, id)
		if len(ix.docs) < before {
			compactions++
		}
		if i%7 == 0 { // and some vectors change meanwhile
			id := fmt.Sprintf("tmp__t%d", i/10*10+3)
			v := randVec()
			if !ix.SetVector(id, v) {
				t.Fatalf("SetVector(%s) refused", id)
			}
			want[id] = v
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction happened")
	}
	checkVectors(t, ix, want)
	// Each survivor with a vector is its own vector's best match.
	for id, v := range want {
		if hits := ix.Search(Query{Vector: v, K: 1}); len(hits) != 1 || hits[0].ID != id {
			t.Fatalf("%s: got %v", id, hits)
		}
	}
}

// TestVectorNoQueryVector: on the real catalog, storing vectors changes no
// search that has none (nor one of another dimension, nor any with vectors
// off): same hits, same scores, as an index without vectors.
func TestVectorNoQueryVector(t *testing.T) {
	tools, _ := loadEval(t)
	docs := catalogDocs(tools, "")
	plain, withDocVec, withSet, off := New(Config{}), New(Config{}), New(Config{}), New(Config{VectorWeight: -1})
	for _, d := range docs {
		plain.Upsert(d)
		withSet.Upsert(d)
		d.Vector = hashVector(docText(d), 64)
		withDocVec.Upsert(d)
		off.Upsert(d)
	}
	for _, d := range docs {
		if !withSet.SetVector(d.ID, hashVector(docText(d), 64)) {
			t.Fatalf("SetVector(%s) refused", d.ID)
		}
	}
	if n, dims := withSet.Vectors(); n != len(docs) || dims != 64 {
		t.Fatalf("Vectors() = %d, %d", n, dims)
	}
	allow := func(id string) bool { return len(id)%3 != 0 }
	differ := 0
	for _, q := range benchQueries(t) {
		for _, k := range []int{5, 10, 60} {
			for _, a := range []func(string) bool{nil, allow} {
				want := plain.Search(Query{Text: q, K: k, Allow: a})
				for name, got := range map[string][]Hit{
					"Doc.Vector":           withDocVec.Search(Query{Text: q, K: k, Allow: a}),
					"SetVector":            withSet.Search(Query{Text: q, K: k, Allow: a}),
					"query of another dim": withSet.Search(Query{Text: q, K: k, Allow: a, Vector: hashVector(q, 32)}),
					"vectors off":          off.Search(Query{Text: q, K: k, Allow: a, Vector: hashVector(q, 64)}),
				} {
					if !slices.Equal(got, want) {
						t.Errorf("%s, %q K=%d: %v, want %v", name, q, k, got, want)
					}
				}
				// With a query vector, the ranking does change (at least
				// sometimes), and stays filtered.
				fusedHits := withSet.Search(Query{Text: q, K: k, Allow: a, Vector: hashVector(q, 64)})
				if !slices.Equal(ids(fusedHits), ids(want)) {
					differ++
				}
				for i, h := range fusedHits {
					if a != nil && !a(h.ID) {
						t.Errorf("%q: denied %s returned", q, h.ID)
					}
					if i > 0 && h.Score > fusedHits[i-1].Score {
						t.Errorf("%q: scores not decreasing: %v", q, fusedHits)
					}
				}
			}
		}
	}
	if differ == 0 {
		t.Error("query vectors changed no ranking")
	}
}

func TestVectorConcurrent(t *testing.T) {
	ix, _ := newVec(t, Config{MinCosine: 0.05})
	docs, vecs := vecCatalog()
	var wg sync.WaitGroup
	var stop atomic.Bool
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r)))
			queries := []string{"", "create issue", "read file", "weather", "automobile"}
			for !stop.Load() {
				qv := []float32{rng.Float32(), rng.Float32(), rng.Float32(), rng.Float32()}
				hits := ix.Search(Query{Text: queries[rng.Intn(len(queries))], Vector: qv,
					Allow: func(id string) bool { return id != "cars__fleet" }})
				for i, h := range hits {
					if h.ID == "cars__fleet" {
						t.Error("rejected tool returned")
					}
					if i > 0 && h.Score > hits[i-1].Score {
						t.Errorf("scores not decreasing: %v", hits)
					}
				}
				ix.Vectors()
			}
		}()
	}
	rng := rand.New(rand.NewSource(9))
	for i := range 3000 {
		d := docs[i%len(docs)]
		switch i % 11 {
		case 0:
			ix.Remove(d.ID)
			ix.Upsert(d)
		case 5:
			ix.SetVector(d.ID, nil)
		case 10:
			if i%7 == 0 {
				ix.ResetVectors()
			}
		default:
			ix.SetVector(d.ID, []float32{rng.Float32(), rng.Float32(), rng.Float32(), rng.Float32() + 0.01})
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, d := range docs {
		if v, ok := vecs[d.ID]; ok {
			ix.SetVector(d.ID, v)
		} else {
			ix.SetVector(d.ID, nil)
		}
	}
	checkVectors(t, ix, vecs)
}
