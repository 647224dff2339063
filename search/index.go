package search

import (
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Doc is one tool as the index sees it.
type Doc struct {
	ID                string // public name, e.g. "github__create_issue" (unique key)
	Server            string // server name
	ServerDescription string
	Name              string // original tool name
	Title             string
	Description       string
	Params            []Param  // from the inputSchema's properties (see ParamsFromSchema)
	Tags              []string // e.g. "read-only", "destructive", "idempotent"
	// Vector is the tool's embedding, for hybrid search (nil: none). Upsert
	// stores a copy normalized to unit length, replacing any earlier vector
	// of the tool; an empty, all-zero or non-finite vector, or one of
	// another dimension than the index's vectors, is ignored (the tool is
	// indexed without one). See SetVector.
	Vector []float32
}

// Fields of a tool document, in posting order.
const (
	fName = iota
	fTitle
	fLead // the description's first sentence
	fDesc // the rest of it
	fParams
	fServer
	fTags
	numFields // at most 8: posting.tf holds four bits per field
)

// posting is one tool in a term's postings list: its slot and the term's
// frequency in each field, four bits each (saturating at 15: BM25 has long
// saturated by then).
type posting struct {
	doc uint32
	tf  uint32 // field f in bits 4f..4f+3
}

// maxFieldTF is the largest frequency a posting records per field.
const maxFieldTF = 15

// srvPosting is one server in a term's server postings list.
type srvPosting struct {
	srv uint32
	tf  uint16
}

type termRec struct {
	// post is sorted by doc slot. It may hold removed tools (dead slots, see docHot.dead)
	// until the next compaction: removal does not splice every list a tool is in, which made
	// removing a large server quadratic.
	post []posting
	df   uint32       // live tools with the term: its document frequency
	srv  []srvPosting // unordered
}

// has reports whether a term is in the index as a fresh index would have it: in a live tool
// or a server description (not only in removed tools, which compaction forgets).
func (t *termRec) has() bool { return t.df > 0 || len(t.srv) > 0 }

// docHot is what scoring reads of a tool for every posting, packed small
// (12 bytes) for the cache: its field lengths, as length codes, and its server.
type docHot struct {
	lens [numFields]uint8
	dead bool // removed: its postings wait for compaction, searches skip it
	srv  uint32
}

// Field lengths are stored as one-byte codes, as Lucene stores its norms:
// exact up to 63 terms, then on a geometric scale (about 2% steps) up to
// maxFieldTokens. BM25 needs no more precision than that.
var codeLen = func() (t [256]int32) {
	for c := range 64 {
		t[c] = int32(c)
	}
	ratio := math.Pow(maxFieldTokens/63.0, 1.0/(255-63))
	for c := 64; c < 256; c++ {
		t[c] = max(t[c-1]+1, int32(math.Round(63*math.Pow(ratio, float64(c-63)))))
	}
	return t
}()

// lenCode returns the code of the largest representable length ≤ n.
func lenCode(n int) uint8 {
	if n < 64 {
		return uint8(n)
	}
	c := sort.Search(256, func(c int) bool { return int(codeLen[c]) > n }) - 1
	return uint8(c)
}

type docRec struct {
	id      string
	nameKey string   // key in Index.byName, "" if not registered
	terms   []uint32 // distinct terms, the name field's first
	nName   uint16   // how many of terms are name terms
	nWords  uint16   // how many of the name terms are words, not aliases (see analyze): they come first
	vec     uint32   // 1 + its row in Index.vecs, 0: no vector
}

type serverRec struct {
	name      string
	nameTerms []uint32 // distinct terms of the name: its words, then aliases of them (see nameTokens)
	nWords    int      // how many of nameTerms are words
	desc      string   // the indexed description
	terms     []uint32 // distinct terms of the description
	length    uint32   // description length in terms
	tools     int
}

// Index is an in-memory lexical index of tools, ranked with BM25F, and
// optionally fused with the cosine similarity of their vectors (see
// SetVector and Query.Vector). It is safe for concurrent use: searches share
// a read lock, writes take the write lock.
type Index struct {
	cfg config

	mu    sync.RWMutex
	dict  map[string]uint32 // term → term id (interned)
	terms []termRec         // by term id

	// Per slot. Slots are handed out in increasing order so postings stay
	// sorted; removed slots are reclaimed by compaction.
	docs  []docRec
	hot   []docHot
	live  int
	total [numFields]int64 // sum of (coded) field lengths over live docs

	byID map[string]uint32 // public name → slot
	// byLowerID maps a lower-cased public name to the slots of the tools whose public name is
	// not lower case already (most are: those are found in byID, see lowerIDSlots).
	byLowerID map[string][]uint32
	byName    map[string][]uint32 // lower-cased multi-word original name → slots

	servers   []serverRec
	srvByName map[string]uint32
	srvFree   []uint32
	srvLive   int
	srvLenSum int64

	vecs vecStore // the tools' vectors, for hybrid search

	pool sync.Pool // *scratch

	// gen counts writes; ops caches, for the current gen, the tool a search for a file
	// operation alone finds (see placeFileOps), which is the same for every unfiltered query.
	gen uint64
	ops struct {
		mu  sync.Mutex
		gen uint64
		m   map[string]opResult
	}
	// norms caches, for the current gen, the BM25F length normalization of
	// every field and length code (see normTable).
	norms atomic.Pointer[normTable]
	// global caches, for the current gen, the statistics of every tool; visStats those of
	// the tools a class of searchers may see (see Query.Visible), by Query.VisibleKey.
	global      atomic.Pointer[collStats]
	compactions uint64 // compactions so far: they renumber slots
	visStats    struct {
		mu   sync.Mutex
		m    map[string]*collStats
		memo int // document frequencies remembered by the statistics in m (maxDFMemoTotal)
	}
}

// normTable holds w_f / (1 - b + b·len/avglen_f) for every field f and
// length code (len = codeLen[code]), for one generation of the index:
// scoring reads it instead of dividing per posting.
type normTable struct {
	gen uint64
	n   [numFields][256]float64
}

// normsFor returns the normalization table of the current generation,
// building it on first use after a write. Callers hold ix.mu (read or
// write); concurrent readers may build it twice, identically.
func (ix *Index) normsFor() *normTable {
	if t := ix.norms.Load(); t != nil && t.gen == ix.gen {
		return t
	}
	t := &normTable{gen: ix.gen, n: *ix.normsOver(float64(ix.live), &ix.total)}
	ix.norms.Store(t)
	return t
}

// normsOver returns the normalization table of n tools whose (coded) field lengths sum to
// total.
func (ix *Index) normsOver(n float64, total *[numFields]int64) *[numFields][256]float64 {
	cfg := &ix.cfg
	var t [numFields][256]float64
	for f := range numFields {
		if total[f] == 0 || cfg.w[f] == 0 {
			continue // no tool has the field (or it does not count): no posting reads it
		}
		invAvg := n / float64(total[f])
		for c := range 256 {
			t[f][c] = cfg.w[f] / (1 - cfg.b + cfg.b*float64(codeLen[c])*invAvg)
		}
	}
	return &t
}

// New returns an empty index.
func New(cfg Config) *Index { return newIndex(resolve(cfg)) }

func newIndex(cfg config) *Index {
	return &Index{
		cfg:       cfg,
		dict:      map[string]uint32{},
		byID:      map[string]uint32{},
		byLowerID: map[string][]uint32{},
		byName:    map[string][]uint32{},
		srvByName: map[string]uint32{},
	}
}

// Len returns the number of tools in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Upsert adds d, replacing any tool with the same ID (and its vector: the
// tool keeps d.Vector, if usable, or none).
func (ix *Index) Upsert(d Doc) {
	fields, aliases, aliasTerms := analyze(d)
	key := nameKey(d.Name)
	vec, vecOK := unitVector(nil, d.Vector)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.gen++
	if old, ok := ix.byID[d.ID]; ok {
		ix.removeSlot(old)
	}
	slot := uint32(len(ix.docs))
	rec := docRec{id: d.ID, terms: make([]uint32, 0, 64)}

	// Count terms per field, name terms first in the distinct list.
	at := make(map[uint32]int, 64) // term → index in rec.terms and tfs
	tfs := make([]uint32, 0, 64)
	var lens [numFields]uint8
	for f, toks := range fields {
		for _, t := range toks {
			id := ix.intern(t)
			i, ok := at[id]
			if !ok {
				i = len(tfs)
				at[id] = i
				tfs = append(tfs, 0)
				rec.terms = append(rec.terms, id)
				if f == fName {
					rec.nName++
				}
			}
			if (tfs[i]>>(4*f))&maxFieldTF < maxFieldTF {
				tfs[i] += 1 << (4 * f)
			}
		}
		lens[f] = lenCode(len(toks) - aliases[f]) // an alias is another spelling of words, not more
	}
	rec.nWords = rec.nName - uint16(aliasTerms)
	rec.terms = append([]uint32(nil), rec.terms...) // exact size: it lives as long as the tool
	for i, id := range rec.terms {
		t := &ix.terms[id]
		t.post = append(t.post, posting{doc: slot, tf: tfs[i]})
		t.df++
	}
	for f := range numFields {
		ix.total[f] += int64(codeLen[lens[f]])
	}

	ix.byID[d.ID] = slot
	if lid := lower(d.ID); lid != d.ID {
		ix.byLowerID[lid] = append(ix.byLowerID[lid], slot)
	}
	if key != "" {
		rec.nameKey = key
		ix.byName[key] = append(ix.byName[key], slot)
	}
	ix.docs = append(ix.docs, rec)
	ix.hot = append(ix.hot, docHot{lens: lens, srv: ix.serverFor(d.Server, d.ServerDescription)})
	ix.live++
	if vecOK && (ix.vecs.dims == 0 || ix.vecs.dims == len(vec)) {
		ix.setVec(slot, vec)
	}
}

// Remove deletes the tool with the given public name (and its vector), if
// present.
func (ix *Index) Remove(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if slot, ok := ix.byID[id]; ok {
		ix.gen++
		ix.removeSlot(slot)
	}
}

func (ix *Index) intern(t string) uint32 {
	if id, ok := ix.dict[t]; ok {
		return id
	}
	id := uint32(len(ix.terms))
	ix.dict[t] = id
	ix.terms = append(ix.terms, termRec{})
	return id
}

// alive reports whether slot s holds a tool (not one removed: see docHot.dead).
func (ix *Index) alive(s uint32) bool { return !ix.hot[s].dead }

// lookup returns the id of term t if the index has it (see termRec.has).
func (ix *Index) lookup(t string) (uint32, bool) {
	id, ok := ix.dict[t]
	return id, ok && ix.terms[id].has()
}

// removeSlot removes the tool in slot. Its postings stay, marked dead through hot[slot], until
// compaction (when dead slots are more than 1024 and a quarter of the live ones): a removal
// costs the tool's own terms, not the length of their postings lists.
func (ix *Index) removeSlot(slot uint32) {
	rec := &ix.docs[slot]
	for _, id := range rec.terms {
		ix.terms[id].df--
	}
	for f := range numFields {
		ix.total[f] -= int64(codeLen[ix.hot[slot].lens[f]])
	}
	delete(ix.byID, rec.id)
	if lid := lower(rec.id); lid != rec.id {
		ix.byLowerID[lid] = without(ix.byLowerID[lid], slot)
		if len(ix.byLowerID[lid]) == 0 {
			delete(ix.byLowerID, lid)
		}
	}
	if rec.nameKey != "" {
		ix.byName[rec.nameKey] = without(ix.byName[rec.nameKey], slot)
		if len(ix.byName[rec.nameKey]) == 0 {
			delete(ix.byName, rec.nameKey)
		}
	}
	ix.releaseServer(ix.hot[slot].srv)
	if rec.vec != 0 {
		ix.dropVec(slot)
	}
	*rec = docRec{}
	ix.hot[slot] = docHot{dead: true}
	ix.live--
	if dead := len(ix.docs) - ix.live; dead > 1024 && dead > ix.live/4 {
		ix.compact()
	}
}

// compact renumbers the live slots densely, keeping their order (so postings
// stay sorted), drops the postings of removed tools, and renumbers the
// references to the slots.
func (ix *Index) compact() {
	ix.gen++ // caches keyed by slot (the file operations' tools) are stale now
	ix.compactions++
	const gone = math.MaxUint32
	remap := make([]uint32, len(ix.docs))
	n := uint32(0)
	for s := range ix.docs {
		if ix.alive(uint32(s)) {
			remap[s] = n
			ix.docs[n], ix.hot[n] = ix.docs[s], ix.hot[s]
			n++
		} else {
			remap[s] = gone
		}
	}
	clear(ix.docs[n:])
	ix.docs = append([]docRec(nil), ix.docs[:n]...)
	ix.hot = append([]docHot(nil), ix.hot[:n]...)
	for i := range ix.terms {
		p := ix.terms[i].post
		kept := p[:0]
		for _, x := range p {
			if to := remap[x.doc]; to != gone {
				kept = append(kept, posting{doc: to, tf: x.tf})
			}
		}
		if cap(kept) > 2*len(kept)+8 {
			kept = append([]posting(nil), kept...)
		}
		ix.terms[i].post = kept
	}
	for id, s := range ix.byID {
		ix.byID[id] = remap[s]
	}
	// Vector rows stay where they are (docRec.vec moved with the tool); the
	// tool slot of each follows the tool.
	for r, s := range ix.vecs.slots {
		ix.vecs.slots[r] = remap[s]
	}
	for _, m := range []map[string][]uint32{ix.byLowerID, ix.byName} {
		for _, slots := range m {
			for j := range slots {
				slots[j] = remap[slots[j]]
			}
		}
	}
	ix.compactTerms()
}

// compactTerms drops the terms no tool or server uses any more, so that a
// catalog that churns through vocabulary does not grow the dictionary
// forever, and renumbers the rest.
func (ix *Index) compactTerms() {
	remap := make([]uint32, len(ix.terms))
	n := uint32(0)
	for i := range ix.terms {
		if ix.terms[i].has() {
			remap[i] = n
			ix.terms[n] = ix.terms[i]
			n++
		} else {
			remap[i] = math.MaxUint32
		}
	}
	if int(n) == len(ix.terms) {
		return
	}
	clear(ix.terms[n:])
	ix.terms = append([]termRec(nil), ix.terms[:n]...)
	for t, id := range ix.dict {
		if remap[id] == math.MaxUint32 {
			delete(ix.dict, t)
		} else {
			ix.dict[t] = remap[id]
		}
	}
	for i := range ix.docs {
		for j, id := range ix.docs[i].terms {
			ix.docs[i].terms[j] = remap[id]
		}
	}
	for i := range ix.servers {
		for _, ids := range [][]uint32{ix.servers[i].terms, ix.servers[i].nameTerms} {
			for j, id := range ids {
				ids[j] = remap[id]
			}
		}
	}
}

// serverFor returns the server slot for name, (re)indexing its description
// when it is new or changed, and counts one more tool on it. Every tool of a
// server carries its description (Doc.ServerDescription): it is tokenized
// only when it changed, not once per tool, which a rebuild of many tools of
// few servers would pay for every tool.
func (ix *Index) serverFor(name, desc string) uint32 {
	s, ok := ix.srvByName[name]
	if !ok {
		if n := len(ix.srvFree); n > 0 {
			s = ix.srvFree[n-1]
			ix.srvFree = ix.srvFree[:n-1]
		} else {
			s = uint32(len(ix.servers))
			ix.servers = append(ix.servers, serverRec{})
		}
		ix.srvByName[name] = s
		ix.servers[s] = serverRec{name: name}
		// The terms its tools index in their server field (analyze: the first maxFieldTokens),
		// no more: a term no tool holds is dropped by compaction (compactTerms).
		seen := map[uint32]bool{}
		toks, _, aliasTerms := nameTokens(name)
		for _, t := range toks {
			if id := ix.intern(t); !seen[id] {
				seen[id] = true
				ix.servers[s].nameTerms = append(ix.servers[s].nameTerms, id)
			}
		}
		ix.servers[s].nWords = len(ix.servers[s].nameTerms) - aliasTerms
		ix.srvLive++
		ix.indexServer(s, desc)
	} else if ix.servers[s].desc != desc {
		ix.unindexServer(s)
		ix.indexServer(s, desc)
	}
	ix.servers[s].tools++
	return s
}

func (ix *Index) releaseServer(s uint32) {
	rec := &ix.servers[s]
	rec.tools--
	if rec.tools > 0 {
		return
	}
	ix.unindexServer(s)
	delete(ix.srvByName, rec.name)
	*rec = serverRec{}
	ix.srvFree = append(ix.srvFree, s)
	ix.srvLive--
}

func (ix *Index) indexServer(s uint32, desc string) {
	toks := analyzeServer(desc)
	tf := map[uint32]uint16{}
	var order []uint32
	for _, t := range toks {
		id := ix.intern(t)
		if _, ok := tf[id]; !ok {
			order = append(order, id)
		}
		if tf[id] < 65535 {
			tf[id]++
		}
	}
	for _, id := range order {
		ix.terms[id].srv = append(ix.terms[id].srv, srvPosting{srv: s, tf: tf[id]})
	}
	rec := &ix.servers[s]
	rec.desc, rec.terms, rec.length = strings.Clone(desc), order, uint32(len(toks))
	ix.srvLenSum += int64(len(toks))
}

func (ix *Index) unindexServer(s uint32) {
	rec := &ix.servers[s]
	for _, id := range rec.terms {
		p := ix.terms[id].srv
		for i := range p {
			if p[i].srv == s {
				p[i] = p[len(p)-1]
				ix.terms[id].srv = p[:len(p)-1]
				break
			}
		}
	}
	ix.srvLenSum -= int64(rec.length)
	rec.terms, rec.length, rec.desc = nil, 0, ""
}

// analyze tokenizes the fields of d. The name and the server name are read by nameTokens:
// aliases counts, by field, their tokens that are aliases of their words (getlog of getLogs),
// and aliasTerms the distinct terms of the name that are nothing else.
func analyze(d Doc) (f [numFields][]string, aliases [numFields]int, aliasTerms int) {
	add := func(field int, text string) {
		tokenize(text, maxFieldBytes, func(t string, _ termKind) {
			if len(f[field]) < maxFieldTokens {
				f[field] = append(f[field], t)
			}
		})
	}
	name := d.Name
	if name == "" {
		name = d.ID
	}
	f[fName], aliases[fName], aliasTerms = nameTokens(name)
	add(fTitle, d.Title)
	lead, rest := splitLead(d.Description)
	add(fLead, lead)
	add(fDesc, rest)
	for _, p := range d.Params {
		add(fParams, p.Name)
		add(fParams, p.Description)
	}
	f[fServer], aliases[fServer], _ = nameTokens(d.Server)
	for _, t := range d.Tags {
		add(fTags, t)
	}
	return f, aliases, aliasTerms
}

// nameTokens returns the terms of a name (at most maxFieldTokens), its words first, then the
// aliases of its words (termAlias: getlog of getLogs, another spelling of get and log); how
// many of them are aliases, and how many distinct aliases are no word of the name.
func nameTokens(name string) (toks []string, aliases, aliasTerms int) {
	var alias []string
	tokenize(name, maxFieldBytes, func(t string, k termKind) {
		switch {
		case len(toks)+len(alias) >= maxFieldTokens:
		case k == termAlias:
			alias = append(alias, t)
		default:
			toks = append(toks, t)
		}
	})
	if len(alias) == 0 {
		return toks, 0, 0
	}
	seen := make(map[string]bool, len(toks)+len(alias))
	for _, t := range toks {
		seen[t] = true
	}
	for _, t := range alias {
		if !seen[t] {
			seen[t] = true
			aliasTerms++
		}
	}
	return append(toks, alias...), len(alias), aliasTerms
}

// maxLeadBytes bounds the first sentence of a description.
const maxLeadBytes = 300

// splitLead cuts a description after its first sentence: the summary most
// tool descriptions start with, before usage notes and argument lists.
func splitLead(desc string) (lead, rest string) {
	desc = strings.TrimSpace(desc)
	end := len(desc)
	for i, r := range desc {
		if i >= maxLeadBytes {
			end = i
			break
		}
		switch r {
		case '\n', '。', '！', '？', '；':
			return desc[:i], desc[i:]
		case '.', '!', '?', ';':
			if i+1 == len(desc) || desc[i+1] == ' ' || desc[i+1] == '\n' {
				return desc[:i+1], desc[i+1:]
			}
		}
	}
	if end < len(desc) {
		// Too long for a sentence: cut at a space before the limit.
		if j := strings.LastIndexByte(desc[:end], ' '); j > 0 {
			end = j
		}
	}
	return desc[:end], desc[end:]
}

func analyzeServer(desc string) []string {
	var toks []string
	tokenize(desc, maxFieldBytes, func(t string, _ termKind) {
		if len(toks) < maxFieldTokens {
			toks = append(toks, t)
		}
	})
	return toks
}

// maxFieldTokens bounds the terms indexed per field: a description is
// rarely a tenth of this, and a hostile one should not bloat the index.
const maxFieldTokens = 4096

// nameKey returns the lower-cased original name when it is specific enough
// for an exact mention in a query to be meaningful: it has at least two words
// (create_issue, getStories, 获取新闻), not a single common word such as
// "search" or 搜索. CJK text, unsegmented, counts a word per two characters
// (its bigrams are no words of their own).
func nameKey(name string) string {
	words, cjk := 0, 0
	tokenize(name, maxTokenBytes*4, func(t string, kind termKind) {
		switch r, n := utf8.DecodeRuneInString(t); {
		case !isCJK(r):
			if kind == termWord {
				words++
			}
		case n == len(t):
			cjk++ // a character
		}
	})
	if words += (cjk + 1) / 2; words < 2 {
		return ""
	}
	return lower(nfc(name)) // as queries are read (see parseQuery)
}

// lower maps every rune of s to its lower case (unicode.ToLower; an invalid byte becomes
// U+FFFD).
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || (c >= 'A' && c <= 'Z') {
			return strings.ToLower(s) // the same, in one allocation
		}
	}
	return s
}

// lowerIDSlots appends to dst the slots of the tools whose lower-cased public name is lid (a
// lower-case string).
func (ix *Index) lowerIDSlots(dst []uint32, lid string) []uint32 {
	if s, ok := ix.byID[lid]; ok {
		dst = append(dst, s)
	}
	return append(dst, ix.byLowerID[lid]...)
}

func without(s []uint32, x uint32) []uint32 {
	for i, v := range s {
		if v == x {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}
