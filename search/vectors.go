package search

import (
	"math"
	"slices"
	"strings"
)

// vecStore holds the tools' vectors, unit length, packed for the scan: row r
// is data[r*dims : (r+1)*dims], the vector of tool slot slots[r] (whose
// docRec.vec is r+1). Rows are dense: removing one moves the last into its
// place, so a search reads one contiguous array, of the tools that have a
// vector only. dims is 0 exactly when there is no row.
type vecStore struct {
	dims  int
	data  []float32
	slots []uint32
}

// rrfK is the rank offset of reciprocal rank fusion (the usual 60): a tool
// at rank r of a ranking scores w/(rrfK+r).
const rrfK = 60

// unitVector writes v normalized to unit length into dst (reused when large
// enough) and returns it; false when v is empty, all zero or has a NaN or
// infinite component.
func unitVector(dst, v []float32) ([]float32, bool) {
	var ss float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false
		}
		ss += f * f
	}
	if ss == 0 {
		return nil, false // also an empty v
	}
	norm := math.Sqrt(ss)
	if cap(dst) < len(v) {
		dst = make([]float32, len(v))
	}
	dst = dst[:len(v)]
	for i, x := range v {
		dst[i] = float32(float64(x) / norm)
	}
	return dst, true
}

// SetVector attaches v, the embedding of the tool with public name id (the
// key of Upsert and Remove), replacing its vector if it had one; v is copied
// and normalized to unit length. A nil v removes the tool's vector. It
// returns false, changing nothing, when no tool has that name, or when v is
// unusable: empty, all zero, with a NaN or infinite component, or of another
// dimension than the vectors the index holds (the first vector stored fixes
// the dimension, until ResetVectors or until no tool has a vector).
func (ix *Index) SetVector(id string, v []float32) bool {
	var u []float32
	if v != nil {
		var ok bool
		if u, ok = unitVector(nil, v); !ok {
			return false
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	slot, ok := ix.byID[id]
	if !ok {
		return false
	}
	if u == nil {
		if ix.docs[slot].vec != 0 {
			ix.dropVec(slot)
		}
		return true
	}
	if ix.vecs.dims != 0 && ix.vecs.dims != len(u) {
		return false
	}
	ix.setVec(slot, u)
	return true
}

// ResetVectors drops every tool's vector (when the embedding model changes,
// say); the next vector stored fixes the dimension anew.
func (ix *Index) ResetVectors() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, s := range ix.vecs.slots {
		ix.docs[s].vec = 0
	}
	ix.vecs = vecStore{}
}

// Vectors returns how many tools have a vector, and their dimension (0 when
// none has).
func (ix *Index) Vectors() (n, dims int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.vecs.slots), ix.vecs.dims
}

// setVec stores u (unit length, of the store's dimension or the first) as
// the vector of slot. Callers hold ix.mu.
func (ix *Index) setVec(slot uint32, u []float32) {
	vs := &ix.vecs
	rec := &ix.docs[slot]
	if rec.vec != 0 {
		r := int(rec.vec - 1)
		copy(vs.data[r*vs.dims:(r+1)*vs.dims], u)
		return
	}
	if vs.dims == 0 {
		vs.dims = len(u)
	}
	vs.data = append(vs.data, u...)
	vs.slots = append(vs.slots, slot)
	rec.vec = uint32(len(vs.slots))
}

// dropVec removes the vector of slot, which has one: the last row takes its
// place. Callers hold ix.mu.
func (ix *Index) dropVec(slot uint32) {
	vs := &ix.vecs
	rec := &ix.docs[slot]
	r, last := int(rec.vec-1), len(vs.slots)-1
	rec.vec = 0
	if r != last {
		copy(vs.data[r*vs.dims:(r+1)*vs.dims], vs.data[last*vs.dims:])
		vs.slots[r] = vs.slots[last]
		ix.docs[vs.slots[r]].vec = uint32(r + 1)
	}
	vs.slots = vs.slots[:last]
	vs.data = vs.data[:last*vs.dims]
	switch {
	case last == 0:
		*vs = vecStore{}
	case cap(vs.slots) > 64 && len(vs.slots) < cap(vs.slots)/4:
		// Mostly removed: give the memory back.
		vs.slots = slices.Clip(append([]uint32(nil), vs.slots...))
		vs.data = slices.Clip(append([]float32(nil), vs.data...))
	}
}

// vcand is a vector candidate: a tool slot and its cosine with the query.
type vcand struct {
	slot uint32
	cos  float32
}

// vecBetter orders vector candidates: higher cosine first, then smaller ID.
func (ix *Index) vecBetter(a, b vcand) bool {
	if a.cos != b.cos {
		return a.cos > b.cos
	}
	return ix.docs[a.slot].id < ix.docs[b.slot].id
}

// vectorTop returns the best Config.VectorCandidates tools by cosine with
// qv (a unit vector of the store's dimension), best first, among those at
// or above Config.MinCosine that pass the same filter as lexical candidates
// (Query.Allow, through the query's verdicts, so it runs at most once per
// tool and query, and only for a tool that would enter the selection).
func (ix *Index) vectorTop(sc *scratch, qv []float32, allow func(string) bool) []vcand {
	vs := &ix.vecs
	n, minCos, dims := ix.cfg.vecCands, ix.cfg.minCos, vs.dims
	h := sc.vh[:0] // min-heap: the worst kept candidate at h[0]
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && ix.vecBetter(h[l], h[r]) {
				m = r
			}
			if !ix.vecBetter(h[i], h[m]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	qv = qv[:dims]
	for r, s := range vs.slots {
		c := dot(qv, vs.data[r*dims:(r+1)*dims])
		if float64(c) < minCos {
			continue
		}
		x := vcand{s, c}
		if len(h) == n && !ix.vecBetter(x, h[0]) {
			continue
		}
		if !ix.alive(s) || ix.verdict(sc, s, allow) != slotAllowed {
			continue
		}
		if len(h) < n {
			h = append(h, x)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !ix.vecBetter(h[p], h[i]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		} else {
			h[0] = x
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b vcand) int {
		if ix.vecBetter(a, b) {
			return -1
		}
		return 1 // no two candidates are equal: their IDs differ
	})
	sc.vh = h
	return h
}

// dot is the inner product of a and b (len(b) ≥ len(a)), in float32: four
// accumulators of two products each (the fastest scalar form measured; the
// bounds checks are hoisted out of the loop), always summed in the same
// order, so a given pair of vectors always gives the same result.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 8 && len(b) >= 8 {
		s0 += a[0]*b[0] + a[4]*b[4]
		s1 += a[1]*b[1] + a[5]*b[5]
		s2 += a[2]*b[2] + a[6]*b[6]
		s3 += a[3]*b[3] + a[7]*b[7]
		a, b = a[8:], b[8:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// fused is a tool in the fusion of the lexical and vector rankings.
type fused struct {
	slot     uint32
	lexRank  int // 1-based, 0: not in the lexical ranking
	vecRank  int // 1-based, 0: not among the vector candidates
	lexScore float64
	score    float64
}

// fuse merges the lexical ranking lex (as Search would return it, deeper
// than K) with the vector candidates for qv, by weighted reciprocal rank
// fusion: 1/(60+lexical rank) + VectorWeight/(60+vector rank), a ranking
// the tool is missing from adding nothing; ties go to the higher lexical
// score, then the smaller ID. The tools lex places first on their own
// (pinned: exact mentions, and the tool of each file operation) keep their
// places at the head, in their order, with scores raised above the rest
// (see Query.Vector).
func (ix *Index) fuse(sc *scratch, lex []cand, pinned []uint32, qv []float32, allow func(string) bool) []cand {
	w := ix.cfg.vecW
	vec := ix.vectorTop(sc, qv, allow)
	all := make([]fused, 0, len(lex)+len(vec))
	at := make(map[uint32]int, len(lex)+len(vec)) // slot → index in all
	for i, c := range lex {
		at[c.slot] = len(all)
		all = append(all, fused{slot: c.slot, lexRank: i + 1, lexScore: c.score})
	}
	for j, v := range vec {
		if i, ok := at[v.slot]; ok {
			all[i].vecRank = j + 1
			continue
		}
		at[v.slot] = len(all)
		all = append(all, fused{slot: v.slot, vecRank: j + 1})
	}
	for i := range all {
		f := &all[i]
		if f.lexRank > 0 {
			f.score = 1 / float64(rrfK+f.lexRank)
		}
		if f.vecRank > 0 {
			f.score += w / float64(rrfK+f.vecRank)
		}
	}
	// The pinned head, in lexical order, then the rest by fused score.
	isPinned := func(f fused) bool { return f.lexRank > 0 && slices.Contains(pinned, f.slot) }
	var head []fused
	rest := all[:0:0]
	for _, f := range all {
		if isPinned(f) {
			head = append(head, f)
		} else {
			rest = append(rest, f)
		}
	}
	slices.SortFunc(rest, func(a, b fused) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.lexScore != b.lexScore:
			if a.lexScore > b.lexScore {
				return -1
			}
			return 1
		}
		return strings.Compare(ix.docs[a.slot].id, ix.docs[b.slot].id)
	})
	// A pinned tool at place i of the head adds the largest fused score
	// there is (rank 1 in both rankings) once per place from it to the end
	// of the head, so scores stay ordered.
	maxScore := (1 + w) / (rrfK + 1)
	out := make([]cand, 0, len(all))
	for i, f := range head {
		out = append(out, cand{f.slot, f.score + float64(len(head)-i)*maxScore})
	}
	for _, f := range rest {
		out = append(out, cand{f.slot, f.score})
	}
	return out
}
