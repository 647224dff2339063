package search

import (
	"math"
	"sync"
)

// collStats are the collection statistics a search scores with (BM25's document count,
// document frequencies and average field lengths, and the same for server descriptions): those
// of every tool of the index, or those of the tools one searcher may see (Query.Visible), so
// that a tool it may not see weighs on nothing it is shown: not on a score, not on the score
// floor, not on whether a word of its query counts.
type collStats struct {
	gen   uint64
	slots int     // len(ix.docs) when computed
	epoch uint64  // ix.compactions when computed: compaction renumbers slots
	n     float64 // tools
	norms *[numFields][256]float64
	// vis holds the visible tools' slots (a bit per slot); nil: every live tool (the index's
	// own statistics, read from it directly).
	vis    []uint64
	srvVis []uint64 // servers with a visible tool (a bit per server slot), when vis is set
	srvN   float64  // servers with a tool in the statistics
	srvLen float64  // their description lengths, summed

	mu      sync.Mutex
	df      map[uint32]float64 // visible document frequencies found so far
	retired bool               // no longer kept by the index: df takes no more (see dfMemo)
}

func hasBit(set []uint64, i uint32) bool { return set[i>>6]&(1<<(i&63)) != 0 }

// maxStatsKeys bounds the visibility classes whose statistics are kept. A class's statistics
// hold a bit per tool slot and per server (12.5 KB at 100k tools), a normalization table (16 KB)
// and their memo of document frequencies, bounded by maxDFMemo and, over every class, by
// maxDFMemoTotal: about 17 MB in all at 100k tools (it was ~600 MB with memos bounded per class
// alone).
const maxStatsKeys = 256

// globalStats returns the statistics of every tool. Callers hold ix.mu (read or write).
func (ix *Index) globalStats() *collStats {
	if st := ix.global.Load(); st != nil && st.gen == ix.gen {
		return st
	}
	st := &collStats{gen: ix.gen, n: float64(ix.live), norms: &ix.normsFor().n,
		srvN: float64(ix.srvLive), srvLen: float64(ix.srvLenSum)}
	ix.global.Store(st)
	return st
}

// statsFor returns the statistics of the tools visible says the searcher may see, for each key
// (see Query.VisibleKey). They are computed once per generation of the index: in full (visible
// asked of every tool) the first time, and after a compaction; else from the previous
// generation's, asking visible only of the tools written since (a write never changes a slot:
// an updated tool gets a new one, and its old one is dead). When every tool is visible they are
// the index's own. Callers hold ix.mu (read).
func (ix *Index) statsFor(key string, visible func(id string) bool) *collStats {
	ix.visStats.mu.Lock()
	prev := ix.visStats.m[key]
	ix.visStats.mu.Unlock()
	if prev != nil && prev.gen == ix.gen {
		return prev
	}
	st := &collStats{gen: ix.gen, slots: len(ix.docs), epoch: ix.compactions,
		vis: make([]uint64, (len(ix.docs)+63)/64), srvVis: make([]uint64, (len(ix.servers)+63)/64),
		df: map[uint32]float64{}}
	from := 0 // the first slot visible is asked of
	if prev != nil && prev.epoch == ix.compactions && prev.vis != nil {
		copy(st.vis, prev.vis[:(prev.slots+63)/64])
		from = prev.slots
	} else if prev != nil && prev.epoch == ix.compactions && prev.vis == nil {
		// Every tool was visible then: so are they still.
		for slot := range prev.slots {
			st.vis[slot>>6] |= 1 << (slot & 63)
		}
		from = prev.slots
	}
	for slot := from; slot < len(ix.docs); slot++ {
		if !ix.hot[slot].dead && visible(ix.docs[slot].id) {
			st.vis[slot>>6] |= 1 << (slot & 63)
		}
	}
	var total [numFields]int64
	for slot := range ix.docs {
		if !hasBit(st.vis, uint32(slot)) {
			continue
		}
		h := &ix.hot[slot]
		if h.dead {
			st.vis[slot>>6] &^= 1 << (slot & 63)
			continue
		}
		st.n++
		for f := range numFields {
			total[f] += int64(codeLen[h.lens[f]])
		}
		if !hasBit(st.srvVis, h.srv) {
			st.srvVis[h.srv>>6] |= 1 << (h.srv & 63)
			st.srvN++
			st.srvLen += float64(ix.servers[h.srv].length)
		}
	}
	if int(st.n) == ix.live {
		// The same numbers as the index's own, without the per-term counts. (slots and epoch
		// are kept: the next generation starts from "every tool".)
		g := ix.globalStats()
		st = &collStats{gen: g.gen, slots: len(ix.docs), epoch: ix.compactions, n: g.n, norms: g.norms, srvN: g.srvN, srvLen: g.srvLen}
	} else {
		st.norms = ix.normsOver(st.n, &total)
	}
	ix.visStats.mu.Lock()
	m := ix.visStats.m
	if m == nil {
		m = map[string]*collStats{}
		ix.visStats.m = m
	}
	if len(m) >= maxStatsKeys && m[key] == nil {
		// Full: the classes not searched since the last write go first, else any one.
		for k, old := range m {
			if old.gen != ix.gen {
				ix.retire(old)
				delete(m, k)
			}
		}
		for k, old := range m {
			if len(m) < maxStatsKeys {
				break
			}
			ix.retire(old)
			delete(m, k)
		}
	}
	if old := m[key]; old != nil && old != st {
		ix.retire(old)
	}
	m[key] = st
	ix.visStats.mu.Unlock()
	return st
}

// retire gives back the memo of statistics the index no longer keeps (see maxDFMemoTotal).
// Searches still holding them read them as before. Callers hold ix.visStats.mu.
func (ix *Index) retire(st *collStats) {
	st.mu.Lock()
	if !st.retired {
		st.retired = true
		ix.visStats.memo -= len(st.df)
		st.df = nil
	}
	st.mu.Unlock()
}

// df is the document frequency of term among the tools of st.
func (ix *Index) df(st *collStats, term uint32) float64 {
	if st.vis == nil {
		return float64(ix.terms[term].df)
	}
	st.mu.Lock()
	d, ok := st.df[term]
	st.mu.Unlock()
	if ok {
		return d
	}
	for _, p := range ix.terms[term].post {
		if hasBit(st.vis, p.doc) {
			d++
		}
	}
	ix.visStats.mu.Lock()
	st.mu.Lock()
	if !st.retired && len(st.df) < maxDFMemo && ix.visStats.memo < maxDFMemoTotal {
		if _, ok := st.df[term]; !ok {
			st.df[term] = d
			ix.visStats.memo++
		}
	}
	st.mu.Unlock()
	ix.visStats.mu.Unlock()
	return d
}

// maxDFMemo bounds the document frequencies a class's statistics remember, and
// maxDFMemoTotal those of every class together (about 36 bytes each: 9.5 MB): classes are made
// of the tenants, users and roles requests name (as the policy's rules tell them apart), so
// a client naming role after role fills maxStatsKeys classes, and its queries, word after
// word, their memos. A frequency not remembered is counted again when asked (a walk of the
// term's postings).
const (
	maxDFMemo      = 1 << 16
	maxDFMemoTotal = 1 << 18
)

// idf is the IDF of term among the tools of st.
func (ix *Index) idf(st *collStats, term uint32) float64 {
	df := ix.df(st, term)
	return math.Log(1 + (st.n-df+0.5)/(df+0.5))
}

// srvDF is the number of the servers of st whose description holds term.
func (ix *Index) srvDF(st *collStats, term uint32) float64 {
	sp := ix.terms[term].srv
	if st.vis == nil {
		return float64(len(sp))
	}
	n := 0.0
	for _, p := range sp {
		if hasBit(st.srvVis, p.srv) {
			n++
		}
	}
	return n
}

// inStats reports whether term is in a tool or server description of st: a word found only in
// tools the searcher may not see is, for it, a word the catalog does not have.
func (ix *Index) inStats(st *collStats, term uint32) bool {
	return st.vis == nil || ix.df(st, term) > 0 || ix.srvDF(st, term) > 0
}
