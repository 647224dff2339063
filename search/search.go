package search

import (
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Query is one search.
type Query struct {
	Text string
	K    int // results wanted; 0 means Config.DefaultK (10)
	// Allow filters candidates before ranking: a tool it rejects is never
	// scored, never returned and never takes one of the K places. It is
	// called at most once per tool and query, under the index's read lock,
	// so it must not call back into the index. nil allows every tool. A
	// rejected tool of the statistics (every tool, or those Visible accepts)
	// still counts toward its server's coverage of the query (see the package
	// doc): a request's filter picks among tools, it does not rescore them.
	Allow func(id string) bool
	// Vector is the embedding of the request, for hybrid search (nil:
	// none). It is used only when the index holds vectors of the same
	// dimension (and Config.VectorWeight is not negative); otherwise it is
	// ignored and the search is lexical. When it is used, the lexical
	// ranking is fused with the tools closest to it (see Config.VectorWeight,
	// MinCosine and VectorCandidates), Hit.Score is the fused score, and
	// Text may be empty. Allow filters the tools found through vectors as
	// it does the others.
	Vector []float32
	// Visible, when not nil, tells which tools the searcher may see at all (Allow is that and
	// the request's own filters). Scores are then computed with the collection statistics of
	// those tools alone (IDF, average lengths, server statistics, the score floor), so that a
	// tool the searcher may not see weighs on nothing it is shown. VisibleKey names the
	// searcher's visibility class: while the index is unchanged, searches with the same key
	// must have the same Visible, whose statistics are computed once (a pass over every tool)
	// and kept for the next searches. Visible is called under the index's read lock, like
	// Allow. nil: the statistics of every tool.
	Visible    func(id string) bool
	VisibleKey string
}

// Hit is one result.
type Hit struct {
	ID string
	// Score is the lexical score (BM25F with boosts), or, for a search
	// fused with vectors (see Query.Vector), the fused score. Either way it
	// orders the results (higher first); it is comparable only between the
	// hits of one search.
	Score float64
}

// Slot states during one search.
const (
	slotNew     = iota // not seen yet
	slotAllowed        // Query.Allow accepted it
	slotDenied         // Query.Allow rejected it
)

// slotState is the per-query state of one tool slot.
type slotState struct {
	score   float32
	mass    float32 // IDF sum of the distinct query words matched
	matched uint32  // which of the first 32 query terms (by weight × IDF) it contains
	state   uint8
}

// srvState is the per-query state of one server.
type srvState struct {
	desc    float64 // BM25 of the query against the server description
	matched uint32  // union of its tools' slotState.matched
	mass    float64 // query weight × IDF of the terms in matched, once computed
	massOK  bool
	nameCov float64 // the query's coverage of the server's name, once computed
	covOK   bool
	touched bool
}

// scratch is the reusable per-query state, pooled.
type scratch struct {
	slots      []slotState
	touched    []uint32 // slots not in state slotNew
	srv        []srvState
	srvTouched []uint32
	cands      []cand
	// Memory that rank reuses: the resolved terms and pairs of the query, exact mentions,
	// the head of the ranking and its ties at the cut (see selectTop).
	terms []resolvedTerm
	pairs [][2]uint32
	ids   []uint32
	top   []cand
	ties  []cand
	// By term id, for coverage: the query weight (at most 1) of the query's
	// terms, and memoized IDFs; both reset through termsTouched.
	qw           []float32
	idf          []float32
	termsTouched []uint32
	// parent, in the search for a file operation a query implies, is the
	// scratch of the query: Allow verdicts are shared, so Allow runs once
	// per tool and query.
	parent *scratch
	qv     []float32  // the query vector, normalized
	vh     []vcand    // vector candidates
	st     *collStats // the statistics the search scores with
}

type cand struct {
	slot  uint32
	score float64
}

func (ix *Index) getScratch() *scratch {
	sc, _ := ix.pool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if len(sc.qw) < len(ix.terms) {
		sc.qw = make([]float32, len(ix.terms)+len(ix.terms)/8)
		sc.idf = make([]float32, len(sc.qw))
	}
	if len(sc.slots) < len(ix.docs) {
		sc.slots = make([]slotState, len(ix.docs)+len(ix.docs)/8)
	}
	if len(sc.srv) < len(ix.servers) {
		sc.srv = make([]srvState, len(ix.servers)+len(ix.servers)/8)
	}
	return sc
}

func (ix *Index) putScratch(sc *scratch) {
	for _, d := range sc.touched {
		sc.slots[d] = slotState{}
	}
	for _, s := range sc.srvTouched {
		sc.srv[s] = srvState{}
	}
	for _, t := range sc.termsTouched {
		sc.qw[t], sc.idf[t] = 0, 0
	}
	sc.touched, sc.srvTouched, sc.cands, sc.termsTouched = sc.touched[:0], sc.srvTouched[:0], sc.cands[:0], sc.termsTouched[:0]
	sc.terms, sc.pairs, sc.ids, sc.top, sc.ties = sc.terms[:0], sc.pairs[:0], sc.ids[:0], sc.top[:0], sc.ties[:0]
	sc.vh = sc.vh[:0]
	sc.parent, sc.st = nil, nil
	ix.pool.Put(sc)
}

// resolvedTerm is a query term found in the index.
type resolvedTerm struct {
	id  uint32
	w   float64 // query weight
	idf float64
	qt  *queryTerm
}

// Search returns the best K tools for q, best first, ties broken by ID. It
// returns nothing when no tool clears the score floor.
//
// Scoring: BM25F over the tool fields; plus the server description's BM25
// (Config.ServerWeight); times the server's coverage of the query, the
// tool name's coverage, the server name's coverage and the name's adjacency
// with the query (see Config). Tools the query names exactly (public name or
// multi-word original name) come first, then the tool for a file operation
// the query implies (see Config.FileIntentWeight). With a usable
// Query.Vector, that ranking is fused with the tools closest to the vector
// (see Query.Vector), after those first tools.
func (ix *Index) Search(q Query) []Hit {
	hits, _ := ix.SearchRanked(q)
	return hits
}

// SearchRanked is Search, and reports whether Query.Vector took part in the ranking (false:
// the lexical ranking alone, as when the index holds no vector of the dimension, the
// searcher may see no tool with a vector, or Config.VectorWeight is not positive).
func (ix *Index) SearchRanked(q Query) (hits []Hit, hybrid bool) {
	cfg := &ix.cfg
	k := q.K
	if k <= 0 {
		k = cfg.defK
	}
	k = min(k, cfg.maxK)
	pq := cfg.parseQuery(q.Text)
	defer pq.release()
	lexical := len(pq.terms) > 0 || len(pq.chunks) > 0
	wantVec := cfg.vecW > 0 && len(q.Vector) > 0
	if !lexical && !wantVec {
		return nil, false
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.live == 0 {
		return nil, false
	}
	useVec := wantVec && ix.vecs.dims == len(q.Vector)
	if !lexical && !useVec {
		return nil, false
	}
	sc := ix.getScratch()
	defer ix.putScratch(sc)
	if q.Visible != nil {
		sc.st = ix.statsFor(q.VisibleKey, q.Visible)
		if sc.st.n == 0 {
			return nil, false // the searcher may see no tool
		}
	} else {
		sc.st = ix.globalStats()
	}
	if useVec && sc.st.vis != nil && !ix.visibleVector(sc.st) {
		// An index of the visible tools alone would hold no vector: lexical, as there.
		if useVec = false; !lexical {
			return nil, false
		}
	}
	var qv []float32
	if useVec {
		qv, useVec = unitVector(sc.qv, q.Vector)
		if useVec {
			sc.qv = qv
		} else if !lexical {
			return nil, false
		}
	}

	var top []cand
	var pinned []uint32
	if lexical {
		top, pinned = ix.searchLexical(sc, pq, q, k)
	}
	if useVec {
		top = ix.fuse(sc, top, pinned, qv, q.Allow)
	}
	if len(top) == 0 {
		return nil, useVec
	}
	top = top[:min(k, len(top))]
	hits = make([]Hit, len(top))
	for i, c := range top {
		hits[i] = Hit{ID: ix.docs[c.slot].id, Score: c.score}
	}
	return hits, useVec
}

// visibleVector reports whether a tool of st has a vector. Callers hold ix.mu (read).
func (ix *Index) visibleVector(st *collStats) bool {
	for _, s := range ix.vecs.slots {
		if hasBit(st.vis, s) {
			return true
		}
	}
	return false
}

// searchLexical returns the lexical ranking of pq (at least k deep when
// there are that many candidates), best first, and the tools that have a
// place at its head of their own: exact mentions and the tools of file
// operations. Callers hold ix.mu (read).
func (ix *Index) searchLexical(sc *scratch, pq parsedQuery, q Query, k int) ([]cand, []uint32) {
	cfg := &ix.cfg
	if len(pq.ops) > 0 && !cfg.keepOpWords {
		// The words of a file operation leave the query only if a tool can
		// take the operation.
		var unserved []string
		for _, op := range pq.ops {
			if _, ok := ix.opTool(sc, op, q.Allow); !ok {
				unserved = append(unserved, op.key())
			}
		}
		if len(unserved) > 0 {
			pq = cfg.parseQuery(q.Text, unserved...) // the caller releases the first parse
			defer pq.release()
		}
	}
	top, exact, head := ix.rank(sc, &pq, q.Allow, k)
	var pinned []uint32
	for _, c := range top[:exact] {
		pinned = append(pinned, c.slot)
	}
	if len(pq.ops) > 0 {
		var placed []uint32
		top, placed = ix.placeFileOps(sc, pq.ops, top, exact, head, q.Allow)
		pinned = append(pinned, placed...)
	}
	return top, pinned
}

// rank scores pq and returns the head of the ranking (at least k deep when
// there are that many candidates), best first, how many of its first tools
// are there because the query names them exactly, and how many of its first
// tools are the same for every k (the reranked head and the exact mentions;
// the rest, for a k above the rerank depth, follow as they scored). The ranking is
// sc's memory: it is not to be used after sc is put back.
func (ix *Index) rank(sc *scratch, pq *parsedQuery, allow func(string) bool, k int) ([]cand, int, int) {
	cfg := &ix.cfg
	st := sc.st
	n := st.n
	terms := sc.terms[:0]
	queryMass := 0.0
	for i := range pq.terms {
		qt := &pq.terms[i]
		id, ok := ix.lookup(qt.text)
		if !ok || !ix.inStats(st, id) {
			continue
		}
		if qt.main || qt.implied {
			sc.qw[id] = float32(min(qt.w, 1))
			sc.termsTouched = append(sc.termsTouched, id)
		}
		idf := ix.idf(st, id)
		queryMass += qt.w * idf
		terms = append(terms, resolvedTerm{id: id, w: qt.w, idf: idf, qt: qt})
	}
	pairs := sc.pairs[:0]
	for _, p := range pq.pairs {
		a, ok1 := ix.lookup(p[0])
		b, ok2 := ix.lookup(p[1])
		if ok1 && ok2 && ix.inStats(st, a) && ix.inStats(st, b) {
			pairs = append(pairs, [2]uint32{a, b})
		}
	}

	// Most informative first: the first 32 are tracked per tool (matched).
	slices.SortStableFunc(terms, func(a, b resolvedTerm) int {
		switch {
		case a.w*a.idf > b.w*b.idf:
			return -1
		case a.w*a.idf < b.w*b.idf:
			return 1
		}
		return 0
	})
	if len(terms) > cfg.maxTerms {
		terms = terms[:cfg.maxTerms]
		queryMass = 0
		for _, t := range terms {
			queryMass += t.w * t.idf
		}
	}
	sc.terms, sc.pairs = terms, pairs // keep what they grew to
	ix.scoreTerms(sc, terms, allow)

	// Candidates: tools over the floor (enough distinctive query words
	// matched), with server evidence. On small catalogs even a word found in
	// a few tools has a low IDF ("ticket" in 3 of 7 tools), so the floor is
	// capped below the IDF of a word found in as many tools as a server has
	// on average, at least three and at most 16 (or in one, below six tools),
	// at most half the catalog: the floor rejects words common to much of a catalog, never
	// a word that picks out one server's handful of tools ("knowledge" in the
	// four tools of a knowledge base among 11). A catalog of at most
	// tinyCatalog tools (or the part of one a searcher may see) has no floor
	// but matching a word of the query: there every word is in most tools,
	// and a few results are no noise to hide.
	perServer := 3.0
	if st.srvN > 0 {
		// (at most 16: on a catalog of a few large servers a word in one server's tools is
		// no longer rare, and the floor of larger catalogs stays at MinIDF)
		perServer = math.Min(math.Max(perServer, math.Ceil(n/st.srvN)), 16)
	}
	few := math.Max(1, math.Min(perServer, math.Floor(n/2)))
	floor := math.Min(cfg.minIDF, 0.9*math.Log(1+(n-few+0.5)/(few+0.5)))
	if n <= tinyCatalog {
		floor = 0
	}
	for _, d := range sc.touched {
		st := &sc.slots[d]
		if st.state == slotAllowed && st.score > 0 && st.mass > 0 && float64(st.mass) >= floor {
			sc.cands = append(sc.cands, cand{d, ix.withServer(float64(st.score), &sc.srv[ix.hot[d].srv], terms, queryMass)})
		}
	}

	// Rerank the head by name and server-name coverage and name proximity: the best
	// rerankDepth by the scores so far, whatever k, so that the best k are the first k of the
	// best k+n (a deeper k adds the next candidates after the head, as they score: reranking
	// only raises a score, so none of them passes a tool of the head).
	top := ix.selectTop(sc, max(cfg.rerankDepth, k))
	head := len(top)
	if head > cfg.rerankDepth {
		slices.SortFunc(top, ix.compare)
		head = cfg.rerankDepth
	}
	for i := range top[:head] {
		rec := &ix.docs[top[i].slot]
		// The name's words, then its aliases (getlog of getLogs): another spelling of its
		// words, which covers them when the query uses it, and is no word more to cover when
		// it does not.
		words, aliases := rec.terms[:rec.nWords], rec.terms[rec.nWords:rec.nName]
		f := 1 + cfg.coverage*ix.coverage(sc, words, aliases)
		f *= 1 + cfg.srvName*ix.serverNameCoverage(sc, ix.hot[top[i].slot].srv)
		if len(pairs) > 0 && len(words) > 1 {
			f *= 1 + cfg.proximity*namePairs(words, pairs)
		}
		top[i].score *= f
	}

	// Exact mentions of a public name or a multi-word original name go first.
	exact := map[uint32]uint8{}
	ids := sc.ids[:0]
	for _, c := range pq.chunks {
		ids = ix.lowerIDSlots(ids[:0], c)
		for level, slots := range [][]uint32{ix.byName[c], ids} {
			for _, d := range slots {
				if ix.verdict(sc, d, allow) == slotAllowed {
					exact[d] = max(exact[d], uint8(level+1))
				}
			}
		}
	}
	sc.ids = ids
	nExact := len(exact)
	reranked := head
	for d := range exact {
		if !slices.ContainsFunc(top[:reranked], func(c cand) bool { return c.slot == d }) {
			head++ // an exact mention comes first at any k
		}
	}
	if len(exact) > 0 {
		best := 0.0
		for _, c := range top {
			best = math.Max(best, c.score)
		}
		for i := range top {
			if e, ok := exact[top[i].slot]; ok {
				top[i].score += float64(e) * (best + 1)
				delete(exact, top[i].slot)
			}
		}
		for d, e := range exact {
			top = append(top, cand{d, float64(e)*(best+1) + ix.withServer(float64(sc.slots[d].score), &sc.srv[ix.hot[d].srv], terms, queryMass)})
		}
	}
	slices.SortFunc(top, ix.compare)
	return top, nExact, head
}

// tinyCatalog is the size up to which a catalog has no score floor (see rank).
const tinyCatalog = 8

// verdict returns the Allow state of slot d, asking allow on first sight.
func (ix *Index) verdict(sc *scratch, d uint32, allow func(string) bool) uint8 {
	st := &sc.slots[d]
	if st.state == slotNew {
		sc.touched = append(sc.touched, d)
		st.state = slotAllowed
		if ix.hot[d].dead {
			st.state = slotDenied // removed, its postings not compacted yet
		} else if sc.parent != nil {
			st.state = ix.verdict(sc.parent, d, allow)
		} else if allow != nil && !allow(ix.docs[d].id) {
			st.state = slotDenied
		}
	}
	return st.state
}

// scoreTerms accumulates the BM25F score, the matched IDF mass and the
// server statistics of every tool in the postings of terms. Tools that allow
// rejects are not scored; those of them in the statistics (the tools the
// searcher may see, which a request's own filters reject) still count among
// the query terms their server's tools match between them, so that a filter
// picks among tools without changing how they score.
func (ix *Index) scoreTerms(sc *scratch, terms []resolvedTerm, allow func(string) bool) {
	cfg := &ix.cfg
	k1, b := cfg.k1, cfg.b
	st := sc.st
	norms, vis := st.norms, st.vis
	slots, hot := sc.slots, ix.hot
	for ti, t := range terms {
		wIDF := t.w * t.idf * (k1 + 1)
		counts := (t.qt.main || t.qt.implied) && !t.qt.part // toward the floor
		var bit uint32
		if ti < 32 {
			bit = 1 << ti
		}
		for _, p := range ix.terms[t.id].post {
			d := p.doc
			st := &slots[d]
			denied := st.state == slotDenied || st.state != slotAllowed && ix.verdict(sc, d, allow) == slotDenied
			if denied && (hot[d].dead || vis != nil && !hasBit(vis, d)) {
				continue // not in the statistics: weighs on nothing
			}
			l := &hot[d].lens
			tf := 0.0
			for x := p.tf; x != 0; {
				shift := bits.TrailingZeros32(x) &^ 3
				f := shift >> 2
				tf += float64((x>>shift)&maxFieldTF) * norms[f][l[f]]
				x &^= maxFieldTF << shift
			}
			if tf == 0 {
				continue
			}
			if denied {
				st.matched |= bit // for its server's evidence alone
				continue
			}
			st.score += float32(wIDF * tf / (k1 + tf))
			if counts {
				st.mass += float32(t.idf)
			}
			st.matched |= bit
		}
	}

	// Which query terms each server's tools match between them.
	for _, d := range sc.touched {
		if st := &sc.slots[d]; st.matched != 0 {
			s := ix.hot[d].srv
			ss := &sc.srv[s]
			if !ss.touched {
				ss.touched = true
				sc.srvTouched = append(sc.srvTouched, s)
			}
			ss.matched |= st.matched
		}
	}

	// Server descriptions, scored as documents of their own.
	if cfg.server == 0 || st.srvN == 0 || st.srvLen == 0 {
		return
	}
	ns := st.srvN
	invAvgS := ns / st.srvLen
	for _, t := range terms {
		sp := ix.terms[t.id].srv
		if len(sp) == 0 {
			continue
		}
		df := ix.srvDF(st, t.id)
		if df == 0 {
			continue
		}
		w := t.w * math.Log(1+(ns-df+0.5)/(df+0.5)) * (k1 + 1)
		for _, p := range sp {
			if st.srvVis != nil && !hasBit(st.srvVis, p.srv) {
				continue // a server with no tool the searcher may see
			}
			ss := &sc.srv[p.srv]
			if !ss.touched {
				ss.touched = true
				sc.srvTouched = append(sc.srvTouched, p.srv)
			}
			tf := float64(p.tf)
			ss.desc += w * tf / (tf + k1*(1-b+b*float64(ix.servers[p.srv].length)*invAvgS))
		}
	}
}

// withServer adds server-level evidence to a tool's own score: the query's
// match with the server description, and the share of the query that the
// server's tools match between them (a compound request whose parts one
// server covers is probably about that server).
func (ix *Index) withServer(score float64, ss *srvState, terms []resolvedTerm, queryMass float64) float64 {
	score += ix.cfg.server * ss.desc
	if queryMass > 0 && ss.matched != 0 {
		if !ss.massOK {
			for m := ss.matched; m != 0; m &= m - 1 {
				t := &terms[bits.TrailingZeros32(m)]
				ss.mass += t.w * t.idf
			}
			ss.massOK = true
		}
		score *= 1 + ix.cfg.serverCover*ss.mass/queryMass
	}
	return score
}

// namePairs is the share of adjacent name term pairs that are adjacent in
// the query too ("bar chart" and generate_bar_chart).
func namePairs(name []uint32, pairs [][2]uint32) float64 {
	hit := 0
	for i := 1; i < len(name); i++ {
		for _, p := range pairs {
			if p[0] == name[i-1] && p[1] == name[i] {
				hit++
				break
			}
		}
	}
	return float64(hit) / float64(len(name)-1)
}

// coverage is the IDF-weighted share of terms found among the query's
// terms, each counted at its query weight (at most 1); the terms of optional
// (aliases of the name's words) count only when the query has them.
func (ix *Index) coverage(sc *scratch, terms, optional []uint32) float64 {
	var have, all float64
	count := func(t uint32) {
		idf := sc.idf[t]
		if idf == 0 {
			idf = float32(ix.idf(sc.st, t))
			sc.idf[t] = idf
			sc.termsTouched = append(sc.termsTouched, t)
		}
		all += float64(idf)
		have += float64(idf * sc.qw[t])
	}
	for _, t := range terms {
		count(t)
	}
	for _, t := range optional {
		if sc.qw[t] > 0 {
			count(t)
		}
	}
	if all == 0 {
		return 0
	}
	return have / all
}

// serverNameCoverage is the coverage of server s's name, computed once per query (the head
// holds several tools of a server).
func (ix *Index) serverNameCoverage(sc *scratch, s uint32) float64 {
	ss := &sc.srv[s]
	if !ss.covOK {
		srv := &ix.servers[s]
		ss.nameCov, ss.covOK = ix.coverage(sc, srv.nameTerms[:srv.nWords], srv.nameTerms[srv.nWords:]), true
		if !ss.touched {
			ss.touched = true
			sc.srvTouched = append(sc.srvTouched, s)
		}
	}
	return ss.nameCov
}

// compare orders candidates: higher score first, then smaller ID.
func (ix *Index) compare(a, b cand) int {
	switch {
	case a.score > b.score:
		return -1
	case a.score < b.score:
		return 1
	}
	return strings.Compare(ix.docs[a.slot].id, ix.docs[b.slot].id)
}

// selectTop returns the best n of sc.cands (unordered, ties at the cut
// broken by ID) with a bounded min-heap, without sorting them all. They are
// in sc.top's memory.
func (ix *Index) selectTop(sc *scratch, n int) []cand {
	cs := sc.cands
	if len(cs) <= n {
		sc.top = append(sc.top[:0], cs...)
		return sc.top
	}
	// The heap orders ties by slot, which is cheap; the cut is fixed up
	// by ID below.
	h := append(sc.top[:0], cs[:n]...)
	worse := func(a, b cand) bool {
		if a.score != b.score {
			return a.score < b.score
		}
		return a.slot > b.slot
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(h[r], h[l]) {
				m = r
			}
			if !worse(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, c := range cs[n:] {
		if worse(h[0], c) {
			h[0] = c
			down(0)
		}
	}
	// Candidates scoring exactly the cut score compete by ID.
	cut := h[0].score
	kept := h[:0]
	for _, c := range h {
		if c.score != cut {
			kept = append(kept, c)
		}
	}
	ties := sc.ties[:0]
	for _, c := range cs {
		if c.score == cut {
			ties = append(ties, c)
		}
	}
	sc.ties = ties
	slices.SortFunc(ties, ix.compare)
	sc.top = append(kept, ties[:n-len(kept)]...)
	return sc.top
}

// placeFileOps gives each file operation the query implies ("write file")
// a place of its own at the top of the ranking, after tools the query names
// exactly and before the tools for the rest of the request: the operation is
// one of the request's needs, and the surest. The place goes to the
// highest-ranked tool of the head named for the operation (its name has
// each word of the operation or a related word: write_file, save_file),
// else to the best tool named for it that a search for the operation alone
// (in the request's own verbs: "save file") finds. A catalog with no tool
// named for it gets nothing added. It also returns the tools that hold
// such a place. Only the first head tools of top, the same for every k (see
// rank), are looked at and placed among, so that the best k are the first k
// of the best k+n here too.
func (ix *Index) placeFileOps(sc *scratch, ops []fileOp, top []cand, exact, head int, allow func(string) bool) ([]cand, []uint32) {
	var placed []uint32
	for oi, op := range ops {
		pos := min(exact+oi, head)
		named, ok := ix.opNamed(op)
		if !ok {
			continue
		}
		found := slices.IndexFunc(top[:head], func(c cand) bool { return named(c.slot) })
		if found >= 0 && found <= pos {
			placed = append(placed, top[found].slot)
			continue
		}
		var c cand
		if found >= 0 {
			c = top[found]
			top = slices.Delete(top, found, found+1)
			head--
		} else {
			if c, ok = ix.searchOp(sc, op, named, allow); !ok {
				continue
			}
			if i := slices.IndexFunc(top, func(x cand) bool { return x.slot == c.slot }); i >= 0 {
				top = slices.Delete(top, i, i+1)
				if i < head {
					head--
				}
			}
		}
		pos = min(pos, head)
		// Score it between its neighbours, so scores stay ordered.
		switch {
		case pos == 0 && len(top) > 0:
			c.score = top[0].score + 1
		case pos < head:
			c.score = (top[pos-1].score + top[pos].score) / 2
		case pos > 0:
			c.score = top[pos-1].score / 2
		}
		top = slices.Insert(top, pos, c)
		head++
		placed = append(placed, c.slot)
	}
	return top, placed
}

// opNamed returns the test of a tool being named for op: its name has each
// word of the operation or a related word (write_file, save_file). It
// reports false when the catalog has no such word at all.
func (ix *Index) opNamed(op fileOp) (func(uint32) bool, bool) {
	var want [][]uint32
	for _, t := range op.words {
		var alts []uint32
		if id, ok := ix.lookup(t); ok {
			alts = append(alts, id)
		}
		for _, w := range related[t] {
			if id, ok := ix.lookup(w); ok {
				alts = append(alts, id)
			}
		}
		if len(alts) == 0 {
			return nil, false
		}
		want = append(want, alts)
	}
	return func(d uint32) bool {
		rec := &ix.docs[d]
		name := rec.terms[:rec.nName]
		for _, alts := range want {
			if !slices.ContainsFunc(alts, func(t uint32) bool { return slices.Contains(name, t) }) {
				return false
			}
		}
		return true
	}, true
}

// opTool returns the tool that a search for op alone finds for it (see
// searchOp), and whether there is one.
func (ix *Index) opTool(sc *scratch, op fileOp, allow func(string) bool) (cand, bool) {
	named, ok := ix.opNamed(op)
	if !ok {
		return cand{}, false
	}
	return ix.searchOp(sc, op, named, allow)
}

// opResult is the outcome of a search for a file operation alone.
type opResult struct {
	c  cand
	ok bool
}

// searchOp returns the best tool named for op (named) that a search for op alone (op.query)
// finds, and whether there is one. Without a filter the answer depends only on the index, so it
// is cached until the next write. Callers hold ix.mu (read).
func (ix *Index) searchOp(sc *scratch, op fileOp, named func(uint32) bool, allow func(string) bool) (cand, bool) {
	key := op.query()
	cache := allow == nil && sc.st.vis == nil // the answer depends only on the index
	if cache {
		ix.ops.mu.Lock()
		r, hit := ix.ops.m[key]
		hit = hit && ix.ops.gen == ix.gen
		ix.ops.mu.Unlock()
		if hit {
			return r.c, r.ok
		}
	}
	pq := ix.cfg.parseQuery(key)
	// The operation's own words count as the request's ("save file" looks
	// for write_file too, in a catalog without "save"), a verb the request
	// did not use at the weight of a related word.
	for _, t := range op.words {
		if i := slices.IndexFunc(pq.terms, func(qt queryTerm) bool { return qt.text == t }); i >= 0 {
			pq.terms[i].implied = true
		} else {
			pq.terms = append(pq.terms, queryTerm{text: t, w: ix.cfg.synonym, implied: true})
		}
	}
	osc := ix.getScratch()
	osc.parent, osc.st = sc, sc.st
	list, _, _ := ix.rank(osc, &pq, allow, 1)
	var r opResult
	if i := slices.IndexFunc(list, func(c cand) bool { return named(c.slot) }); i >= 0 {
		r = opResult{list[i], true}
	}
	ix.putScratch(osc) // list is its memory
	pq.release()
	if cache {
		ix.ops.mu.Lock()
		if ix.ops.m == nil || ix.ops.gen != ix.gen {
			ix.ops.m, ix.ops.gen = map[string]opResult{}, ix.gen
		}
		if len(ix.ops.m) < 64 {
			ix.ops.m[key] = r
		}
		ix.ops.mu.Unlock()
	}
	return r.c, r.ok
}
