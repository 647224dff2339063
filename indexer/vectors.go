package indexer

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/search"
)

// Embedder turns texts into vectors for hybrid search (embeddings.Client is one). Name
// identifies the vector space: vectors of different names are never mixed.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Name() string
}

// Vector bounds.
const (
	// maxEmbedText bounds the text embedded for one tool (bytes).
	maxEmbedText = 4 << 10
	// embedBatch is how many tool texts one Embed call carries.
	embedBatch = 64
	// defaultEmbedTimeout bounds the embedding of a search request.
	defaultEmbedTimeout = 2 * time.Second
	// embedBatchTimeout bounds one background Embed call.
	embedBatchTimeout = time.Minute
)

// pfxVector keys the vector cache: v/<sha256 of the embedder's name and the text> → the vector
// as little-endian float32s. It is derived data (not part of the replicated content: Digest
// skips it) that spares the embedder a second request for a text it embedded before.
const pfxVector = "v/"

// vecWant is a tool whose vector the vectorizer should attach: the cache key of its text. The
// text itself is rebuilt from Badger when its turn comes, so a replay of 100k tools does not
// hold 100k texts in memory.
type vecWant struct {
	key [32]byte
}

// embedText is what is embedded for a tool: its name, title, description, parameters and the
// server's description, cut to maxEmbedText.
func embedText(d search.Doc) string {
	var b strings.Builder
	b.WriteString(d.Server)
	if d.ServerDescription != "" {
		b.WriteString(" (" + d.ServerDescription + ")")
	}
	b.WriteString(": " + d.Name)
	if d.Title != "" {
		b.WriteString(" — " + d.Title)
	}
	if d.Description != "" {
		b.WriteString("\n" + d.Description)
	}
	if len(d.Params) > 0 {
		b.WriteString("\nParameters:")
		for _, p := range d.Params {
			b.WriteString(" " + p.Name)
			if p.Description != "" {
				b.WriteString(" (" + p.Description + ")")
			}
			b.WriteString(";")
		}
	}
	s := b.String()
	if len(s) > maxEmbedText {
		s = strings.ToValidUTF8(s[:maxEmbedText], "")
	}
	return s
}

func (c *Catalog) vectorKey(text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(c.cfg.Embedder.Name()))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return [32]byte(h.Sum(nil))
}

// upsertDoc indexes a tool and, with an Embedder, asks for its vector. The caller holds c.mu
// (or is Open).
func (c *Catalog) upsertDoc(d search.Doc) {
	c.index.Upsert(d)
	if c.cfg.Embedder == nil {
		return
	}
	c.vecWant[d.ID] = vecWant{key: c.vectorKey(embedText(d))}
	select {
	case c.vecKick <- struct{}{}:
	default:
	}
}

// removeDoc removes a tool from the index (and any pending vector). The caller holds c.mu.
func (c *Catalog) removeDoc(public string) {
	c.index.Remove(public)
	delete(c.vecWant, public)
}

// vectorize attaches vectors to the tools that want one until ctx ends: from the cache, else
// from the Embedder in batches. A failing embedder is retried with backoff (lexical search
// works meanwhile). Follow runs it.
func (c *Catalog) vectorize(ctx context.Context) {
	wait := time.Second
	for {
		n, err := c.vectorizeBatch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			c.log.Warn().Err(err).Dur("retry_in", wait).Msg("tool embeddings failed; search is lexical for the tools without a vector")
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Minute)
			continue
		case n > 0:
			wait = time.Second
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-c.vecKick:
		}
	}
}

// vectorizeBatch handles up to embedBatch wanted tools and reports how many wants it settled
// (0: nothing to do now; a want that changed meanwhile kicks the vectorizer again).
func (c *Catalog) vectorizeBatch(ctx context.Context) (int, error) {
	type job struct {
		public       string
		want         vecWant
		server, tool string
		serverDesc   string
		text         string
		vec          []float32
	}
	c.mu.RLock()
	jobs := make([]job, 0, embedBatch)
	for public, w := range c.vecWant {
		if len(jobs) == embedBatch {
			break
		}
		e := c.byPublic[public]
		if e == nil {
			continue // removed: removeDoc drops its want
		}
		desc := ""
		if e.srv != nil {
			desc = e.srv.rec.Description
		}
		jobs = append(jobs, job{public: public, want: w, server: e.server, tool: e.tool, serverDesc: desc})
	}
	c.mu.RUnlock()
	if len(jobs) == 0 {
		return 0, nil
	}
	// The cache first, then the texts of the others from their stored definitions.
	err := c.db.View(func(txn *badger.Txn) error {
		for i := range jobs {
			j := &jobs[i]
			item, err := txn.Get(append([]byte(pfxVector), j.want.key[:]...))
			switch {
			case err == nil:
				if err := item.Value(func(v []byte) error { j.vec = decodeVector(v); return nil }); err != nil {
					return err
				}
				continue
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
			raw, err := readTool(txn, j.server, j.tool)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // changed or removed since: its new want follows
			}
			if err != nil {
				return err
			}
			d := parseDef(raw)
			d.Name = j.tool
			j.text = embedText(searchDoc(j.public, j.server, j.serverDesc, d))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var texts []string
	var missing []int
	for i := range jobs {
		// A text whose key is not the wanted one belongs to a newer definition: skip it now.
		if jobs[i].vec == nil && jobs[i].text != "" && c.vectorKey(jobs[i].text) == jobs[i].want.key {
			texts = append(texts, jobs[i].text)
			missing = append(missing, i)
		}
	}
	if len(texts) > 0 {
		vecs, refused, err := c.embedTexts(ctx, texts)
		if err != nil {
			return 0, err
		}
		wb := c.db.NewWriteBatch()
		for j, i := range missing {
			if refused[j] != nil {
				// Dropped below like any want that cannot be met: the tool's next change asks again.
				c.log.Warn().Err(refused[j]).Str("server", jobs[i].server).Str("tool", jobs[i].tool).
					Msg("the embeddings endpoint refused this tool's text; it is found lexically only")
				continue
			}
			jobs[i].vec = vecs[j]
			if err := wb.Set(append([]byte(pfxVector), jobs[i].want.key[:]...), encodeVector(vecs[j])); err != nil {
				wb.Cancel()
				return 0, err
			}
		}
		if err := wb.Flush(); err != nil {
			return 0, err
		}
	}
	// Attach, unless the tool changed (or left) meanwhile: then its new text is wanted instead.
	// A want that cannot be met (its definition no longer gives its text) is dropped: the
	// tool's next change asks again.
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for _, j := range jobs {
		if cur, ok := c.vecWant[j.public]; !ok || cur.key != j.want.key {
			continue
		}
		delete(c.vecWant, j.public)
		done++
		if j.vec != nil && !c.index.SetVector(j.public, j.vec) {
			c.badVectors.Add(1)
		}
	}
	return done, nil
}

// embedTexts embeds the texts of tools in one call. When the endpoint refuses the batch for
// what it holds (see refusedInput: a text longer than the model takes, say), each text is
// embedded alone, so that one tool's text does not keep the others of its batch from their
// vectors forever: refused[i] is then the error of a text refused alone (and vecs[i] nil).
// When no text of a batch of several is embedded alone either, the endpoint refuses
// everything (a bad request format, say): that is the call's error, and every want stays.
func (c *Catalog) embedTexts(ctx context.Context, texts []string) (vecs [][]float32, refused []error, err error) {
	refused = make([]error, len(texts))
	vecs, err = c.embed(ctx, texts)
	if err == nil || !refusedInput(err) {
		return vecs, refused, err
	}
	if len(texts) == 1 {
		refused[0] = err
		return make([][]float32, 1), refused, nil
	}
	vecs = make([][]float32, len(texts))
	embedded := false
	for i, text := range texts {
		v, e := c.embed(ctx, []string{text})
		switch {
		case e == nil:
			vecs[i], embedded = v[0], true
		case refusedInput(e):
			refused[i] = e
		default: // the endpoint failed: retried later, with backoff
			return nil, nil, e
		}
	}
	if !embedded {
		return nil, nil, err
	}
	return vecs, refused, nil
}

// embed is one background Embed call (counted in embedErrors when it fails).
func (c *Catalog) embed(ctx context.Context, texts []string) ([][]float32, error) {
	ectx, cancel := context.WithTimeout(ctx, embedBatchTimeout)
	vecs, err := c.cfg.Embedder.Embed(ectx, texts)
	cancel()
	if err == nil && len(vecs) != len(texts) {
		err = errors.New("the embedder returned a different number of vectors")
	}
	if err != nil && ctx.Err() == nil {
		c.embedErrors.Add(1)
	}
	return vecs, err
}

// refusedInput reports whether err is the endpoint refusing the texts of a request rather
// than failing or refusing every request: a 2xx response that is not as specified (a wrong
// count or dimension, say), or HTTP 400, 413 or 422 (what OpenAI, vLLM and
// text-embeddings-inference answer to an input longer than the model takes). A bad key (401,
// 403) or model (404) refuses every text alike: isolating texts would only multiply requests.
func refusedInput(err error) bool {
	var e *embeddings.Error
	if !errors.As(err, &e) {
		return false
	}
	switch {
	case e.Code == embeddings.CodeMalformed:
		return true
	case e.Code == embeddings.CodeRejected:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge ||
			e.Status == http.StatusUnprocessableEntity
	}
	return false
}

// queryVector embeds a search request (nil when there is no Embedder or it fails in time).
func (c *Catalog) queryVector(ctx context.Context, query string) []float32 {
	if c.cfg.Embedder == nil {
		return nil
	}
	c.mu.RLock()
	ix := c.index // a rebuild replaces it (under c.mu)
	c.mu.RUnlock()
	if n, _ := ix.Vectors(); n == 0 {
		return nil
	}
	timeout := c.cfg.EmbedTimeout
	if timeout <= 0 {
		timeout = defaultEmbedTimeout
	}
	if v, ok := c.queryVecs.get(query); ok {
		return v
	}
	if !c.embedDown.try(timeout) {
		return nil // the embedder failed lately: lexical at once, not after its timeout
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vecs, err := c.cfg.Embedder.Embed(qctx, []string{query})
	if err != nil || len(vecs) != 1 {
		c.embedErrors.Add(1)
		switch {
		case refusedInput(err):
			// The endpoint answered, refusing this request's text (too long for the model,
			// say): no reason to keep the next requests, other searchers', from it.
			c.embedDown.ok()
		case ctx.Err() == nil: // the endpoint's failure, not a caller that stopped waiting
			c.embedDown.fail(c.embedRetryMin)
		}
		c.log.Debug().Err(err).Msg("query embedding failed; lexical search only")
		return nil
	}
	c.embedDown.ok()
	c.queryVecs.put(query, vecs[0])
	return vecs[0]
}

// Request embeddings after a failure: none for embedRetryMin, then twice as long after each
// failure again, up to embedRetryMax. A hanging endpoint would otherwise make every search wait
// the whole EmbedTimeout before answering lexically.
const (
	embedRetryMin = 5 * time.Second
	embedRetryMax = time.Minute
)

// breaker holds off request embeddings after failures (see embedRetryMin).
type breaker struct {
	until atomic.Int64 // unix nanoseconds: no attempt before
	wait  atomic.Int64 // the current hold-off, 0 after a success
}

// try reports whether a request embedding may be tried now. Once a hold-off is over, one
// caller tries (for up to probe) while the others still answer lexically: with a hanging
// endpoint every search in the next probe would otherwise wait on it again.
func (b *breaker) try(probe time.Duration) bool {
	u := b.until.Load()
	if u == 0 {
		return true
	}
	now := time.Now()
	if now.UnixNano() < u {
		return false
	}
	return b.until.CompareAndSwap(u, now.Add(probe).UnixNano())
}

func (b *breaker) fail(floor time.Duration) {
	w := max(floor, min(2*time.Duration(b.wait.Load()), embedRetryMax))
	b.wait.Store(int64(w))
	b.until.Store(time.Now().Add(w).UnixNano())
}

func (b *breaker) ok() {
	if b.wait.Load() != 0 {
		b.wait.Store(0)
		b.until.Store(0)
	}
}

// queryCacheSize bounds the request embeddings a replica remembers (agents repeat searches).
const queryCacheSize = 1024

// vecCache is a small LRU of request embeddings, safe for concurrent use.
type vecCache struct {
	mu    sync.Mutex
	order *list.List // front: most recent; values are *vecEntry
	byKey map[string]*list.Element
}

type vecEntry struct {
	key string
	vec []float32
}

func (vc *vecCache) get(key string) ([]float32, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if el, ok := vc.byKey[key]; ok {
		vc.order.MoveToFront(el)
		return el.Value.(*vecEntry).vec, true
	}
	return nil, false
}

func (vc *vecCache) put(key string, vec []float32) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.byKey == nil {
		vc.byKey, vc.order = map[string]*list.Element{}, list.New()
	}
	if el, ok := vc.byKey[key]; ok {
		el.Value.(*vecEntry).vec = vec
		vc.order.MoveToFront(el)
		return
	}
	vc.byKey[key] = vc.order.PushFront(&vecEntry{key: key, vec: vec})
	if vc.order.Len() > queryCacheSize {
		old := vc.order.Back()
		vc.order.Remove(old)
		delete(vc.byKey, old.Value.(*vecEntry).key)
	}
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// sweepVectors deletes cached vectors no current tool wants (Open, before anything runs).
func (c *Catalog) sweepVectors() error {
	if c.cfg.Embedder == nil {
		return nil
	}
	keep := make(map[[32]byte]bool, len(c.vecWant))
	for _, w := range c.vecWant {
		keep[w.key] = true
	}
	var stale [][]byte
	err := c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(pfxVector)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			if len(k) != len(pfxVector)+32 || !keep[[32]byte(k[len(pfxVector):])] {
				stale = append(stale, k)
			}
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	wb := c.db.NewWriteBatch()
	for _, k := range stale {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return err
		}
	}
	return wb.Flush()
}
