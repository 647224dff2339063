package indexer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/search"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/suggest"
)

// SelectPrefix starts a query that selects tools by exact public name: "select:a__x,b__y".
const SelectPrefix = "select:"

func apiError(code, format string, a ...any) *subjects.Error {
	return &subjects.Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// resolve checks the request version and the principal.
func (c *Catalog) resolve(v int, pr subjects.Principal) (subjects.Principal, *subjects.Error) {
	if v != 0 && v != subjects.Version {
		return pr, apiError(subjects.CodeBadRequest, "unsupported version %d (want %d)", v, subjects.Version)
	}
	if bad := pr.Check(); bad != nil {
		return pr, bad
	}
	if !c.Ready() {
		return pr, &subjects.Error{Code: subjects.CodeUnavailable, Message: "catalog replica is catching up with the registry stream", Reason: "rebuilding"}
	}
	out, err := c.pol.Resolve(pr)
	if err != nil {
		return pr, apiError(subjects.CodeUnknownPrincipal, "%v", err)
	}
	return out, nil
}

// filter is what decides whether a tool is a candidate for one request.
type filter struct {
	pr          subjects.Principal
	servers     map[string]bool // nil: any
	tags        []string
	usableOnly  bool // search: fresh and expired only (plus stale/unavailable with withUnavail)
	withUnavail bool
}

// visibility applies a filter to entries, in order: server filter, cache scope, freshness,
// policy, tags. Everything that is the same for every tool of a server (scope, and freshness
// when the server has no per-tool revocation) is computed once per server and request: Allow
// runs for every candidate of a search, so it must be cheap. Callers hold c.mu (read).
type visibility struct {
	c  *Catalog
	f  *filter
	sc *visScratch
	// decide: the policy must be asked per tool (a configured policy, or a needs-approval tag
	// filter). With the open policy every tool is allowed (policy package doc).
	decide bool
}

type serverVerdict struct {
	done    bool // ok and uniform are computed
	ok      bool // server filter and cache scope pass
	uniform bool // every tool of the server has the same freshness verdict
	have    bool // v and stateOK are computed
	stateOK bool
	v       *staleness.Verdict
}

// visScratch holds the per-server verdicts of one request, indexed by serverMem.ord; pooled.
type visScratch struct {
	sv      []serverVerdict
	touched []int
}

var visPool = sync.Pool{New: func() any { return &visScratch{} }}

func (c *Catalog) visibility(f *filter) *visibility {
	sc := visPool.Get().(*visScratch)
	if len(sc.sv) < c.nextOrd {
		sc.sv = make([]serverVerdict, c.nextOrd+c.nextOrd/4+16)
	}
	return &visibility{c: c, f: f, sc: sc,
		decide: !c.pol.IsOpen() || slices.Contains(f.tags, LabelNeedsApproval)}
}

// release returns the scratch to the pool; vis must not be used after.
func (vis *visibility) release() {
	sc := vis.sc
	for _, i := range sc.touched {
		sc.sv[i] = serverVerdict{}
	}
	sc.touched = sc.touched[:0]
	visPool.Put(sc)
	vis.sc = nil
}

func (vis *visibility) server(e *entry) *serverVerdict {
	s := e.srv
	sv := &vis.sc.sv[s.ord]
	if sv.done {
		return sv
	}
	vis.sc.touched = append(vis.sc.touched, s.ord)
	sv.done, sv.ok, sv.uniform = true, true, len(s.rec.Revoked) == 0
	if vis.f.servers != nil && !vis.f.servers[e.server] {
		sv.ok = false
	} else if km := s.tools0; km != nil && !vis.c.pol.MayUseScope(vis.f.pr, km.CacheScope, km.AuthContext) {
		sv.ok = false
	}
	return sv
}

func (vis *visibility) stateOK(v staleness.Verdict) bool {
	if !vis.f.usableOnly {
		return true
	}
	switch v.State {
	case staleness.Fresh, staleness.Expired:
		return true
	case staleness.Stale, staleness.Unavailable:
		return vis.f.withUnavail
	}
	return false
}

// allow reports whether e is a candidate.
func (vis *visibility) allow(e *entry) bool {
	sv := vis.server(e)
	if !sv.ok {
		return false
	}
	var v *staleness.Verdict
	if sv.uniform {
		if !vis.uniformOK(sv, e) {
			return false
		}
		v = sv.v
	} else {
		tv := vis.c.view.Tool(e.server, e.tool)
		if !vis.stateOK(tv) {
			return false
		}
		v = &tv
	}
	d := policy.Decision{Allowed: true}
	if vis.decide {
		d = vis.c.decide(vis.f.pr, e)
		if !d.Allowed {
			return false
		}
	}
	for _, t := range vis.f.tags {
		if !slices.Contains(labels(e, d, *v), t) {
			return false
		}
	}
	return true
}

// uniformOK reports whether the freshness verdict that every tool of e's server shares (sv is
// its server's, sv.uniform) passes the filter, computing it on first use.
func (vis *visibility) uniformOK(sv *serverVerdict, e *entry) bool {
	if !sv.have {
		sv.v = vis.c.uniformVerdict(e)
		sv.stateOK, sv.have = vis.stateOK(*sv.v), true
	}
	return sv.stateOK
}

// hidesServer reports whether vis lets none of the tools of e's server through for what they
// all share (the server filter, the cache scope, and the freshness when it is uniform): a
// caller may skip the server's tools without asking allow for each.
func (vis *visibility) hidesServer(e *entry) bool {
	sv := vis.server(e)
	return !sv.ok || sv.uniform && !vis.uniformOK(sv, e)
}

// overview says, for the current in-memory state, whether every tool passes the freshness
// filter. It is computed once per version.
type overview struct {
	version     uint64
	allUsable   bool // every tool is fresh or expired (and no server has revocations)
	allListable bool // every tool is fresh, expired, stale or unavailable (no revocations)
}

// scopeOverview says, for the current in-memory state, which servers hold private lists of
// tools. It is computed once per version, without looking at the tools.
type scopeOverview struct {
	version uint64
	private []*serverMem
	sig     uint64 // a hash of which servers' tools are private, and to whom
	// The tenants and users the private lists' authContexts name.
	tenants, users map[string]bool
}

// everyToolVisible reports whether f lets every tool of the catalog through, so that search can
// skip the per-candidate check: the open policy, no server or tag filter, every tool in a
// usable state, and every private list visible to the principal. Callers hold c.mu (read).
func (c *Catalog) everyToolVisible(f *filter) bool {
	if !c.pol.IsOpen() || f.servers != nil || len(f.tags) > 0 || !f.usableOnly {
		return false
	}
	ov := c.overviewNow()
	if f.withUnavail && !ov.allListable || !f.withUnavail && !ov.allUsable {
		return false
	}
	return c.everyToolPermitted(f.pr)
}

// overviewNow returns the overview of the current version, computing it on first use. Callers
// hold c.mu (read).
func (c *Catalog) overviewNow() *overview {
	ov := c.overview.Load()
	if ov == nil || ov.version != c.version {
		ov = &overview{version: c.version, allUsable: true, allListable: true}
		for _, s := range c.servers {
			if len(s.tools) == 0 {
				continue
			}
			if len(s.rec.Revoked) > 0 {
				ov.allUsable, ov.allListable = false, false
			}
			for _, e := range s.tools {
				switch c.uniformVerdict(e).State {
				case staleness.Fresh, staleness.Expired:
				case staleness.Stale, staleness.Unavailable:
					ov.allUsable = false
				default:
					ov.allUsable, ov.allListable = false, false
				}
				break // one tool stands for all (uniform verdict)
			}
		}
		c.overview.Store(ov)
	}
	return ov
}

// scopesNow returns the scope overview of the current version, computing it on first use.
// Callers hold c.mu (read).
func (c *Catalog) scopesNow() *scopeOverview {
	so := c.scopes.Load()
	if so == nil || so.version != c.version {
		so = &scopeOverview{version: c.version, tenants: map[string]bool{}, users: map[string]bool{}}
		for name, s := range c.servers {
			if km := s.tools0; km != nil && subjects.NormalScope(km.CacheScope) == subjects.ScopePrivate && len(s.tools) > 0 {
				so.private = append(so.private, s)
				for _, part := range strings.Split(km.AuthContext, "/") {
					switch k, v, _ := strings.Cut(part, ":"); k {
					case "tenant":
						so.tenants[v] = true
					case "user":
						so.users[v] = true
					}
				}
				h := fnv.New64a()
				h.Write([]byte(name + "\x00" + km.AuthContext))
				so.sig += h.Sum64() // a sum: the same whatever the map's order
			}
		}
		c.scopes.Store(so)
	}
	return so
}

// everyToolPermitted reports whether pr may see every tool of the catalog (whatever its state):
// the open policy, and every private list visible to pr. Callers hold c.mu (read).
func (c *Catalog) everyToolPermitted(pr subjects.Principal) bool {
	if !c.pol.IsOpen() {
		return false
	}
	for _, s := range c.scopesNow().private {
		if !c.pol.MayUseScope(pr, s.tools0.CacheScope, s.tools0.AuthContext) {
			return false
		}
	}
	return true
}

// visibleKey names what pr may see: principals with the same key see the same tools. Which
// tools pr may see depends on the policy's decisions, the same for its whole class (see
// policy.Class), and on the private lists it may see: on the scope signature, and on its
// tenant and user when a private list names them (or they are the local ones, whose lists are
// those without an authContext). Names no list or rule names collapse to one key, so a client
// that makes names up does not make one key per name. Callers hold c.mu (read).
func (c *Catalog) visibleKey(pr subjects.Principal) string {
	so := c.scopesNow()
	tenant, user := "~", "~"
	if pr.Tenant == policy.Local.Tenant || so.tenants[pr.Tenant] {
		tenant = strconv.Quote(pr.Tenant)
	}
	if pr.User == policy.Local.User || so.users[pr.User] {
		user = strconv.Quote(pr.User)
	}
	return strconv.FormatUint(so.sig, 16) + " " + tenant + " " + user + " " + c.pol.Class(pr)
}

// cachedVerdict is a server's freshness verdict, valid while the in-memory state is at version
// and the clock is before until.
type cachedVerdict struct {
	version uint64
	until   time.Time // zero: no time limit
	v       staleness.Verdict
}

// uniformVerdict is the freshness verdict of a tool of a server without per-tool revocations:
// the same for all its tools (they are all in the server's last list), so it is computed once
// (by the staleness view) and cached until the next applied event or until a fresh list's TTL
// runs out. Callers hold c.mu (read).
func (c *Catalog) uniformVerdict(e *entry) *staleness.Verdict {
	now := c.now()
	if cv := e.srv.verdict.Load(); cv != nil && cv.version == c.version && (cv.until.IsZero() || now.Before(cv.until)) {
		return &cv.v
	}
	v := c.view.Tool(e.server, e.tool)
	cv := &cachedVerdict{version: c.version, v: v}
	if km := e.srv.tools0; v.State == staleness.Fresh && km != nil && km.TTLMs != nil {
		// The view turns expired once now - listedAt > ttl; recompute from then on.
		cv.until = v.ListedAt.Add(staleness.TTL(*km.TTLMs))
	}
	e.srv.verdict.Store(cv)
	return &cv.v
}

func (c *Catalog) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// describe returns what a result shows: the policy's decision and the freshness verdict.
func (vis *visibility) describe(e *entry) (policy.Decision, staleness.Verdict) {
	return vis.c.decide(vis.f.pr, e), vis.c.view.Tool(e.server, e.tool)
}

func (c *Catalog) decide(pr subjects.Principal, e *entry) policy.Decision {
	return c.pol.Decide(pr, policy.Tool{Server: e.server, Name: e.tool, Destructive: e.hints.Destructive})
}

// labels are a tool's permission and risk labels for one principal, plus its state when it is
// not fresh.
func labels(e *entry, d policy.Decision, v staleness.Verdict) []string {
	l := e.hints.tags()
	if d.NeedsApproval {
		l = append(l, LabelNeedsApproval)
	}
	if v.State != staleness.Fresh && v.State != "" {
		l = append(l, string(v.State))
	}
	return l
}

// Search answers a catalog search: ranked lexical retrieval over the tools the principal may
// call (filtered before ranking), or exact tools with "select:NAME[,NAME]".
func (c *Catalog) Search(ctx context.Context, req subjects.SearchRequest) subjects.SearchReply {
	reply := subjects.SearchReply{V: subjects.Version, Tools: []subjects.ToolInfo{}}
	text := strings.TrimSpace(req.Query)
	switch {
	case len(req.Query) > MaxQueryBytes:
		reply.Error = apiError(subjects.CodeTooLarge, "query of %d bytes exceeds %d", len(req.Query), MaxQueryBytes)
	case text == "":
		reply.Error = apiError(subjects.CodeBadRequest, "empty query")
	case req.K < 0 || req.K > MaxK:
		reply.Error = apiError(subjects.CodeBadRequest, "k %d out of range 1..%d (0 = %d)", req.K, MaxK, DefaultK)
	case req.Detail != "" && req.Detail != subjects.DetailName && req.Detail != subjects.DetailSummary && req.Detail != subjects.DetailFull:
		reply.Error = apiError(subjects.CodeBadRequest, "detail %q is not one of name, summary, full", req.Detail)
	case len(req.Servers) > MaxFilterValues || len(req.Tags) > MaxFilterValues:
		reply.Error = apiError(subjects.CodeTooLarge, "more than %d servers or tags", MaxFilterValues)
	}
	if reply.Error != nil {
		return reply
	}
	pr, apiErr := c.resolve(req.V, req.Principal)
	if apiErr != nil {
		reply.Error = apiErr
		return reply
	}
	k := req.K
	if k == 0 {
		k = DefaultK
	}
	detail := req.Detail
	if detail == "" {
		detail = subjects.DetailSummary
	}
	f := &filter{pr: pr, tags: req.Tags, usableOnly: true, withUnavail: req.IncludeUnavailable}
	if len(req.Servers) > 0 {
		f.servers = map[string]bool{}
		for _, s := range req.Servers {
			f.servers[s] = true
		}
	}

	type result struct {
		e     *entry
		score float64
	}
	var results []result
	var qvec []float32
	if !strings.HasPrefix(text, SelectPrefix) {
		qvec = c.queryVector(ctx, pr, text) // before the lock: it may wait for the embedder
	}
	unlock := c.readLock()
	defer unlock()
	vis := c.visibility(f)
	defer vis.release()
	reply.Ranking = subjects.RankingLexical
	if names, ok := strings.CutPrefix(text, SelectPrefix); ok {
		reply.Ranking = subjects.RankingSelect
		seen := map[string]bool{}
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			if n == "" || seen[n] || len(results) >= k {
				continue
			}
			seen[n] = true
			if e := c.byPublic[n]; e != nil && vis.allow(e) {
				results = append(results, result{e: e})
			}
		}
	} else {
		allow := func(id string) bool {
			e := c.byPublic[id]
			return e != nil && vis.allow(e)
		}
		q := search.Query{Text: text, K: k, Allow: allow, Vector: qvec}
		if c.noFastPath || !c.everyToolPermitted(pr) {
			// Scores come from the statistics of the tools pr may see: a tool it may not
			// see weighs on nothing it is shown (see search.Query.Visible).
			perm := c.visibility(&filter{pr: pr})
			defer perm.release()
			q.Visible = func(id string) bool {
				e := c.byPublic[id]
				return e != nil && perm.allow(e)
			}
			q.VisibleKey = c.visibleKey(pr)
		}
		if !c.noFastPath && c.everyToolVisible(f) {
			q.Allow = nil // same answer, without a check per candidate
		}
		hits, hybrid := c.index.SearchRanked(q)
		if hybrid {
			reply.Ranking = subjects.RankingHybrid
		}
		results = make([]result, 0, len(hits))
		for _, h := range hits {
			results = append(results, result{e: c.byPublic[h.ID], score: h.Score})
		}
	}
	reply.Tools = make([]subjects.ToolInfo, 0, len(results))
	ranked := make([][16]byte, 0, len(results)) // the definitions ranked (fillFull reads the same or none)
	for _, r := range results {
		d, v := vis.describe(r.e)
		ti := c.info(r.e, detail, d, v)
		ti.Score = r.score
		reply.Tools = append(reply.Tools, ti)
		ranked = append(ranked, r.e.hash)
	}
	unlock()
	if detail == subjects.DetailFull {
		apiErr, err := c.fillFull(replyRoom(ctx), reply.Tools, ranked)
		if err != nil {
			apiErr = apiError(subjects.CodeInternal, "%v", err)
		}
		if apiErr != nil {
			reply.Tools = []subjects.ToolInfo{}
			reply.Ranking = ""
			reply.Error = apiErr
		}
	}
	return reply
}

// readLock read-locks c.mu and returns its unlock, which does nothing after its first call:
// a request unlocks it by hand before the work that needs no lock, and by defer as well, so a
// panic under the lock (recovered by the service, which keeps serving) never leaves it held,
// which would block the next catalog update, and so the replica, for good.
func (c *Catalog) readLock() (unlock func()) {
	c.mu.RLock()
	locked := true
	return func() {
		if locked {
			locked = false
			c.mu.RUnlock()
		}
	}
}

// info builds a ToolInfo at a detail level; full answers are completed by fillFull. Callers
// hold c.mu.
func (c *Catalog) info(e *entry, detail string, d policy.Decision, v staleness.Verdict) subjects.ToolInfo {
	ti := subjects.ToolInfo{Name: e.public}
	if detail == subjects.DetailName {
		return ti
	}
	ti.Server, ti.Tool, ti.Title, ti.Description = e.server, e.tool, e.title, e.line
	ti.Labels = labels(e, d, v)
	ti.State = stateName(v.State)
	if v.State != staleness.Fresh {
		ti.StateReason = v.Reason
	}
	if detail == subjects.DetailFull {
		if s := c.servers[e.server]; s != nil {
			if km := s.kinds[subjects.KindTools]; km != nil {
				// A catalog written before scopes were normalized on the way in may hold
				// "Private": show the scope as it is enforced.
				ti.CacheScope = subjects.NormalScope(km.CacheScope)
				if ti.CacheScope == "" {
					ti.CacheScope = subjects.ScopePublic
				}
				ti.TTLMs = km.TTLMs
				if !km.ListedAt.IsZero() {
					ti.ListedAt = km.ListedAt.UTC().Format(time.RFC3339Nano)
				}
			}
		}
	}
	return ti
}

func stateName(s staleness.State) string {
	if s == "" {
		return string(staleness.Unknown)
	}
	return string(s)
}

// fillFull reads the stored definitions of full answers: schemas, annotations, the whole
// description and the raw definition, byte-faithful. hashes are those of the definitions the
// answer was built from (under c.mu): a stored definition that differs was written since (a
// message is stored before the in-memory state applies it), maybe in a list the principal may
// not see, so it is not given; the tool is answered as it was listed, without it.
//
// What it adds counts against room, the room of the reply (replyRoom, 0: no bound): once the JSON the
// answer will take surely exceeds it (a definition or schema encodes to at least its bytes that
// are not whitespace, a description to at least its own), it stops reading and returns a
// too_large error, the reply the service would give after encoding the whole answer: a details
// request naming many large definitions, or a full search at a high k, reads, decompresses and
// parses no more than a reply could hold, rather than every definition it names.
func (c *Catalog) fillFull(room int64, tools []subjects.ToolInfo, hashes [][16]byte) (*subjects.Error, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	var least int64 // what the filled parts will surely take, encoded
	tooLarge := func() *subjects.Error {
		return apiError(subjects.CodeTooLarge, "reply of more than %d bytes exceeds the %d bytes a NATS message may hold: ask for fewer names, a lower k, a lower detail or a lower limit",
			least, room)
	}
	var apiErr *subjects.Error
	err := c.db.View(func(txn *badger.Txn) error {
		for i := range tools {
			ti := &tools[i]
			raw, err := readTool(txn, ti.Server, ti.Tool)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // removed since the answer was ranked
			}
			if err != nil {
				return fmt.Errorf("%w: read %s: %w", ErrStore, ti.Name, err)
			}
			if defHash(raw) != hashes[i] {
				continue // changed since the answer was built
			}
			if least += encodedAtLeast(raw); room > 0 && least > room {
				apiErr = tooLarge()
				return nil
			}
			d := parseDef(raw)
			ti.Description = d.Description
			ti.InputSchema, ti.OutputSchema, ti.Annotations, ti.Definition = d.InputSchema, d.OutputSchema, d.Annotations, raw
			least += int64(len(d.Description)) + encodedAtLeast(d.InputSchema) + encodedAtLeast(d.OutputSchema) + encodedAtLeast(d.Annotations)
			if room > 0 && least > room {
				apiErr = tooLarge()
				return nil
			}
		}
		return nil
	})
	return apiErr, err
}

// encodedAtLeast is a lower bound of the bytes a JSON value takes in a reply: encoding/json
// compacts it (drops the whitespace between tokens) and may escape more, never less.
func encodedAtLeast(raw json.RawMessage) int64 {
	n := int64(len(raw))
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			n--
		}
	}
	return n
}

// suggestBudget bounds the tools that the suggestions of one details request compare by edit
// distance (see suggestions): a request naming tools of a server with very many stops comparing
// there. Only tools the caller may see count against it.
const suggestBudget = 5_000

// seenTools remembers, for one details request, which tools of the servers its names start with
// the caller may see (by index in serverMem.sorted: 0 not asked yet, 1 visible, 2 not), so that
// however many names a request gives, it asks visibility at most once per tool.
type seenTools struct {
	marks  map[*serverMem][]uint8
	checks int // visibility questions left (suggestChecks at the start of a request)
}

// suggestChecks bounds the visibility questions one details request asks (each tool at most
// once): its work stays bounded however many tools the caller may not see lie near the names.
// Past it the suggestions stop as when the budget is spent (still the same answer for the same
// catalog, caller and request); only then, with more hidden tools nearer the name than this, can
// they change it.
const suggestChecks = 4 * suggestBudget

// suggestions returns the names visible through vis (a usable-only filter: the tools a call
// would take) that a caller asking for given (a name it may not see, or that nobody lists)
// probably meant, with their distances: tools of a server given starts with (suggest.Servers)
// whose names are within suggest.MaxDistance edits of the rest.
//
// The answer depends only on what the catalog holds, what vis lets through and the request,
// never on the order tools were added in nor on the tools vis hides. Of a server's tools
// (serverMem.sorted) only those whose keys have a length within suggest.MaxDistance of the
// rest's are looked at (no other can be near enough): the rest's length first, then the
// nearest, and in each length from the names that sort nearest the rest outward (suggest.Outward).
// Visibility is asked first, so that only the visible tools compared count against budget,
// which counts down across the names of one request, in the request's order. A tool hidden from
// the caller costs its visibility once per request (seen), never a comparison; at most
// suggestChecks are asked per request. The answer is
// the same whether given exists or not: it is never named itself, nor counted against budget.
// Callers hold c.mu.
func (c *Catalog) suggestions(vis *visibility, seen *seenTools, given string, budget *int) []suggest.Candidate {
	var cands []suggest.Candidate
	suggest.Servers(given, func(server, rest string) bool {
		s := c.servers[server]
		if s == nil || len(s.sorted) == 0 || vis.hidesServer(s.sorted[0]) {
			return true
		}
		marks := seen.marks[s]
		if marks == nil {
			marks = make([]uint8, len(s.sorted))
			seen.marks[s] = marks
		}
		key := suggest.Key(rest)
		for l := range suggest.Lengths(len(key)) {
			lo, _ := slices.BinarySearchFunc(s.sorted, l, func(e *entry, l int) int { return cmp.Compare(e.klen, l) })
			hi, _ := slices.BinarySearchFunc(s.sorted[lo:], l+1, func(e *entry, l int) int { return cmp.Compare(e.klen, l) })
			hi += lo
			at, _ := slices.BinarySearchFunc(s.sorted[lo:hi], rest, func(e *entry, rest string) int { return strings.Compare(e.tool, rest) })
			for i := range suggest.Outward(lo, lo+at, hi) {
				e := s.sorted[i]
				if e.public == given {
					continue
				}
				if marks[i] == 0 {
					if seen.checks <= 0 {
						return false
					}
					seen.checks--
					marks[i] = 2
					if vis.allow(e) {
						marks[i] = 1
					}
				}
				if marks[i] != 1 {
					continue
				}
				if *budget <= 0 {
					return false
				}
				*budget--
				if d, ok := suggest.KeyWithin(key, e.tool, suggest.MaxDistance); ok {
					cands = append(cands, suggest.Candidate{Public: e.public, Dist: 1 + d})
				}
			}
		}
		return true
	})
	return cands
}

// searchSuggestions returns the tools that a search for given finds (as pr, so only what pr may
// see) whose original names are within suggest.MaxDistance edits of given's tool part (what
// follows its first "__", or all of it): the same tool on another server, or given without its
// server. Callers do not hold c.mu (Search takes it).
func (c *Catalog) searchSuggestions(ctx context.Context, pr subjects.Principal, given string) []suggest.Candidate {
	if len(given) > suggest.MaxGiven || strings.HasPrefix(given, "select:") {
		return nil
	}
	name := given
	if _, t, ok := strings.Cut(given, "__"); ok {
		name = t
	}
	key := suggest.Key(name)
	rep := c.Search(ctx, subjects.SearchRequest{V: subjects.Version, Query: given, K: searchSuggestK, Principal: pr})
	var cands []suggest.Candidate
	for _, ti := range rep.Tools {
		if d, ok := suggest.KeyWithin(key, ti.Tool, suggest.MaxDistance); ok && ti.Name != given {
			cands = append(cands, suggest.Candidate{Public: ti.Name, Dist: 1 + d})
		}
	}
	return cands
}

// searchSuggestK is how many search results searchSuggestions looks at; searchSuggestNames is
// for how many missing names of one details request it searches.
const (
	searchSuggestK     = 10
	searchSuggestNames = 3
)

// Details answers get_tool_details: the full entries of the named tools the principal may see,
// whatever their freshness (the state tells it). A name the principal may not see is reported
// exactly like a name that does not exist: not_found. A removed tool the principal could see is
// not_found with reason "removed".
func (c *Catalog) Details(ctx context.Context, req subjects.DetailsRequest) subjects.DetailsReply {
	reply := subjects.DetailsReply{V: subjects.Version, Tools: []subjects.ToolInfo{}}
	switch {
	case len(req.Names) == 0:
		reply.Error = apiError(subjects.CodeBadRequest, "no names")
		return reply
	case len(req.Names) > MaxDetailNames:
		reply.Error = apiError(subjects.CodeTooLarge, "%d names exceed %d", len(req.Names), MaxDetailNames)
		return reply
	}
	for _, n := range req.Names {
		if len(n) > MaxNameBytes {
			reply.Error = apiError(subjects.CodeTooLarge, "a name of %d bytes exceeds %d", len(n), MaxNameBytes)
			return reply
		}
	}
	pr, apiErr := c.resolve(req.V, req.Principal)
	if apiErr != nil {
		reply.Error = apiErr
		return reply
	}
	var missing, removed []string
	var hashes [][16]byte // of the definitions answered (see fillFull)
	seen := map[string]bool{}
	unlock := c.readLock()
	defer unlock()
	vis := c.visibility(&filter{pr: pr})
	defer vis.release()
	for _, n := range req.Names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if e := c.byPublic[n]; e != nil {
			if vis.allow(e) {
				d, v := vis.describe(e)
				reply.Tools = append(reply.Tools, c.info(e, subjects.DetailFull, d, v))
				hashes = append(hashes, e.hash)
				continue
			}
		} else if rr, ok := c.removed[n]; ok &&
			c.pol.Decide(pr, policy.Tool{Server: rr.Server, Name: rr.Tool}).Allowed &&
			c.pol.MayUseScope(pr, rr.CacheScope, rr.AuthContext) {
			removed = append(removed, n)
		}
		missing = append(missing, n)
	}
	near := map[string][]suggest.Candidate{} // missing name → what it probably meant
	if len(missing) > len(removed) {
		budget := suggestBudget
		// Only tools a call would take are suggested, as search shows them (fresh or expired):
		// not a revoked one, nor one whose server is unavailable or whose list is changing.
		usable := c.visibility(&filter{pr: pr, usableOnly: true})
		seen := &seenTools{marks: map[*serverMem][]uint8{}, checks: suggestChecks}
		for _, n := range missing {
			if !slices.Contains(removed, n) {
				near[n] = c.suggestions(usable, seen, n, &budget)
			}
		}
		usable.release()
	}
	unlock()
	searched := 0
	for _, n := range missing {
		if _, ok := near[n]; ok && searched < searchSuggestNames {
			searched++
			near[n] = append(near[n], c.searchSuggestions(ctx, req.Principal, n)...)
		}
	}
	apiErr, err := c.fillFull(replyRoom(ctx), reply.Tools, hashes)
	if err != nil {
		apiErr = apiError(subjects.CodeInternal, "%v", err)
	}
	if apiErr != nil {
		reply.Tools = []subjects.ToolInfo{}
		reply.Error = apiErr
		return reply
	}
	if len(missing) > 0 {
		var parts []string
		for _, n := range missing {
			if slices.Contains(removed, n) {
				n += " (removed)"
			} else if q := suggest.DidYouMean(suggest.Rank(near[n])); q != "" {
				n += " (" + q + ")"
			}
			parts = append(parts, n)
		}
		reply.Error = apiError(subjects.CodeNotFound, "no tool named %s", strings.Join(parts, ", "))
		if len(removed) == len(missing) {
			reply.Error.Reason = subjects.StateRemoved
		}
	}
	return reply
}

// Servers lists, a page at a time, the servers with the counts of what the principal may see,
// and the definitions of their lists that were left out of the catalog. Under a configured
// policy a server none of whose tools the principal may call is not listed; under any policy,
// neither is a server whose every list is private to another authorization context (its
// description and its very use there are that context's). A server left out is never counted:
// the page holds the next req.Limit servers the principal may see whose names sort after
// req.After, and Next is set only when such a server comes after the page.
func (c *Catalog) Servers(ctx context.Context, req subjects.ServersRequest) subjects.ServersReply {
	reply := subjects.ServersReply{V: subjects.Version, Servers: []subjects.ServerSummary{}}
	switch {
	case req.Limit < 0 || req.Limit > MaxServers:
		reply.Error = apiError(subjects.CodeBadRequest, "limit %d out of range 1..%d (0 = %d)", req.Limit, MaxServers, DefaultServers)
		reply.Error.Path = "/limit"
	case len(req.After) > MaxNameBytes:
		reply.Error = apiError(subjects.CodeTooLarge, "after of %d bytes exceeds %d", len(req.After), MaxNameBytes)
		reply.Error.Path = "/after"
	}
	if reply.Error != nil {
		return reply
	}
	pr, apiErr := c.resolve(req.V, req.Principal)
	if apiErr != nil {
		reply.Error = apiErr
		return reply
	}
	limit := req.Limit
	if limit == 0 {
		limit = DefaultServers
	}
	// budget is what the reply may take (0: no bound; see replyRoom): a page ends early rather
	// than make a reply NATS cannot carry. used counts the envelope and the servers so far.
	budget := int(replyRoom(ctx))
	used := 64
	c.mu.RLock()
	defer c.mu.RUnlock()
	vis := c.visibility(&filter{pr: pr})
	defer vis.release()
	names := c.serverNamesNow()
	i := sort.SearchStrings(names, req.After)
	if i < len(names) && req.After != "" && names[i] == req.After {
		i++
	}
	for ; i < len(names); i++ {
		sum, ok := c.serverSummary(vis, pr, names[i])
		if !ok {
			continue
		}
		// A server pr may see comes after the page: there is a next one.
		full := len(reply.Servers) >= limit
		size := 0
		if budget > 0 && !full {
			b, _ := json.Marshal(sum)
			n, _ := json.Marshal(sum.Name) // the next, should this one end the page
			size = len(b) + 1
			full = len(reply.Servers) > 0 && used+size+len(n)+16 > budget
		}
		if full {
			reply.Next = reply.Servers[len(reply.Servers)-1].Name
			break
		}
		reply.Servers = append(reply.Servers, sum)
		used += size
	}
	return reply
}

// serverNamesNow returns the names of every server in memory, sorted, computed once per change
// of the set. Callers hold c.mu (read).
func (c *Catalog) serverNamesNow() []string {
	sn := c.names.Load()
	if sn == nil || sn.set != c.serverSet {
		sn = &serverNames{set: c.serverSet, names: sortedKeys(c.servers)}
		c.names.Store(sn)
	}
	return sn.names
}

// serverNames is the sorted server names of one state of the set of servers.
type serverNames struct {
	set   uint64
	names []string
}

// serverSummary is the summary of one server for pr, false when pr may not see the server.
// Callers hold c.mu (read).
func (c *Catalog) serverSummary(vis *visibility, pr subjects.Principal, name string) (subjects.ServerSummary, bool) {
	s := c.servers[name]
	if s == nil || s.gone() || !s.announced() {
		return subjects.ServerSummary{}, false
	}
	sum := subjects.ServerSummary{Name: name, Description: s.rec.Description}
	for _, e := range s.tools {
		if vis.allow(e) {
			sum.Tools++
		}
	}
	if sum.Tools == 0 && (!c.pol.IsOpen() || !mayUseAList(c.pol, pr, s)) {
		return subjects.ServerSummary{}, false
	}
	for k, n := range map[subjects.Kind]*int{subjects.KindPrompts: &sum.Prompts, subjects.KindResources: &sum.Resources} {
		if km := s.kinds[k]; km != nil && c.pol.MayUseScope(pr, km.CacheScope, km.AuthContext) {
			*n = km.Count
		}
	}
	for _, k := range subjects.Kinds {
		if km := s.kinds[k]; km != nil && c.pol.MayUseScope(pr, km.CacheScope, km.AuthContext) {
			c.addRejected(&sum, pr, k, km)
		}
	}
	sum.Status, sum.Reason = "unknown", ""
	if st := s.rec.Status; st != nil {
		sum.Status, sum.Reason = st.Status, st.Reason
		if st.Code != "" && st.Reason == "" {
			sum.Reason = st.Code
		}
		sum.Transport, sum.Protocol = st.Transport, st.Protocol
	}
	if in := s.rec.Info; in != nil {
		if sum.Transport == "" {
			sum.Transport = in.Transport
		}
		if sum.Protocol == "" {
			sum.Protocol = in.Protocol
		}
	}
	return sum, true
}

// addRejected adds to sum the rejected definitions of one of its server's lists (one pr may
// see), up to MaxRejected in all. Under a configured policy a rejected tool is shown only if
// the policy would let pr call a tool of that name, destructive or not (what a rejected
// definition's annotations say is not to be trusted), and the tools not kept are not counted:
// their names are unknown, so whether pr may see them cannot be told. Nor can it for a name
// kept cut (mayBeCut): a deny matching the end of the real name would not match the cut one.
func (c *Catalog) addRejected(sum *subjects.ServerSummary, pr subjects.Principal, k subjects.Kind, km *kindRec) {
	decide := k == subjects.KindTools && !c.pol.IsOpen()
	for _, r := range km.Rejected {
		if decide && (mayBeCut(r.Name) || !c.pol.Decide(pr, policy.Tool{Server: sum.Name, Name: r.Name}).Allowed ||
			!c.pol.Decide(pr, policy.Tool{Server: sum.Name, Name: r.Name, Destructive: true}).Allowed) {
			continue
		}
		if len(sum.Rejected) >= MaxRejected {
			sum.RejectedMore++
			continue
		}
		sum.Rejected = append(sum.Rejected, subjects.RejectedDefinition{Kind: k, Name: r.Name, Code: r.Code, Message: r.Message})
	}
	if !decide {
		sum.RejectedMore += km.RejectedMore
	}
}

// mayBeCut reports whether a kept rejected name may be the start of a longer one: cut to
// maxRejectedText bytes (by cutText, or by registrysync alike) on a rune boundary at most 3
// bytes before it, and marked with "…". A name of that length that merely ends in "…" is taken
// as cut too (hidden where it cannot be decided: the safe side).
func mayBeCut(name string) bool {
	return len(name) >= maxRejectedText && strings.HasSuffix(name, "…")
}

// mayUseAList reports whether pr may see at least one of the lists s holds, or s holds none yet
// (a configured server still connecting: its status is the operator's to show). A kind only
// announced as changed (list_changed), never listed, is no list: it has no scope of its own.
func mayUseAList(pol *policy.Policy, pr subjects.Principal, s *serverMem) bool {
	listed := false
	for _, km := range s.kinds {
		if !km.Listed {
			continue
		}
		listed = true
		if pol.MayUseScope(pr, km.CacheScope, km.AuthContext) {
			return true
		}
	}
	return !listed
}
