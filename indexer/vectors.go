package indexer

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/search"
	"github.com/mcpstream/mcpstream/subjects"
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
	// embedBatch is how many tool texts one Embed call carries: with the probe text (see
	// embedInSpace), 64, embeddings.Client's default batch, so that they share one response.
	embedBatch = 63
	// defaultEmbedTimeout bounds the embedding of a search request.
	defaultEmbedTimeout = 2 * time.Second
	// embedBatchTimeout bounds one background Embed call.
	embedBatchTimeout = time.Minute
)

// pfxVector keys the vector cache: v/<sha256 of the embedder's name and the text> → the vector
// as little-endian float32s. It is derived data (not part of the replicated content: Digest
// skips it) that spares the embedder a second request for a text it embedded before.
const pfxVector = "v/"

// keyProbe holds the vector space's probe (see probeSpace): sha256 of the embedder's name, then
// the probe text's vector. Under pfxVector, so that load and Digest skip it too.
const keyProbe = pfxVector + "probe"

// probeText is embedded each time the vectorizer starts (see probeSpace).
const probeText = "mcpstream vector space probe: open a ticket, read a file, search the web"

// probeContrastText is embedded with probeText when the vectorizer probes the space, a text
// about something else: an embedder that gives both the same direction (the same vector for
// every text: a stub, a broken deployment) would rank every tool alike (see degenerate).
const probeContrastText = "weather forecast for the mountains: sunny, then rain; take an umbrella"

// distinctMaxCosine is the most cosine the vectors of probeText and probeContrastText may
// have. Unrelated texts are far below it with any working model (even one whose vectors all
// crowd into a narrow cone); only float noise separates one vector from itself.
const distinctMaxCosine = 0.9999

// degenerate returns why an embedder is unusable for search, given its vectors of probeText
// and probeContrastText (nil when it is usable): a zero or non-finite vector has no direction
// (its cosine with anything is undefined: the index refuses it), and an embedder that gives
// two unrelated texts the same direction gives every tool the same cosine with any request, a
// "ranking" that is the tools' names in order.
func degenerate(probe, contrast []float32) error {
	switch {
	case !usableVector(probe) || !usableVector(contrast):
		return errors.New("the embedder returned a zero or non-finite vector for the probe text; it is not used")
	case len(probe) == len(contrast) && cosine(probe, contrast) >= distinctMaxCosine:
		return errors.New("the embedder gave two unrelated probe texts the same direction (the same vector for every text?); it is not used")
	}
	return nil
}

// CheckEmbedder embeds the texts a replica probes its vector space with, as the replica does
// when it starts, and returns the error that would keep it from using e: the endpoint's (a
// wrong key, URL or model) or the vectors' (see degenerate). A replica retries without end, so
// a one-shot command (eval) checks first instead.
func CheckEmbedder(ctx context.Context, e Embedder) error {
	vecs, err := e.Embed(ctx, []string{probeText, probeContrastText})
	switch {
	case err != nil:
		return err
	case len(vecs) != 2:
		return errors.New("the embedder returned a different number of vectors")
	}
	return degenerate(vecs[0], vecs[1])
}

// probeMinCosine is how close the probe's vector must stay to the one stored with the cache
// for the cache to be used: the same model gives the same text the same vector up to float
// noise (a cosine above 0.9999); another model, even of the same dimension, one that has
// nothing to do with it.
const probeMinCosine = 0.99

// vecWant is a tool whose vector the vectorizer should attach: the cache key of its text. The
// text itself is rebuilt from Badger when its turn comes, so a replay of 100k tools does not
// hold 100k texts in memory.
type vecWant struct {
	key [32]byte
	// A text the endpoint refused: when it is asked again (in vecRefused), and the hold-off
	// it was given (doubled after each refusal, from refusedRetryMin to refusedRetryMax).
	retryAt time.Time
	wait    time.Duration
}

// A text the endpoint refused (too long for the model, say, or a proxy's 400 in an outage) is
// asked again after refusedRetryMin, then twice as long after each further refusal, up to
// refusedRetryMax: a refusal that lasts costs one request per text per refusedRetryMax, and a
// passing one does not leave the tool without a vector until its text changes.
const (
	refusedRetryMin = time.Minute
	refusedRetryMax = 6 * time.Hour
)

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
	key := c.vectorKey(embedText(d))
	if e := c.byPublic[d.ID]; e != nil {
		e.vkey = key
	}
	c.vecGen++
	if r, ok := c.vecRefused[d.ID]; ok {
		if r.key == key {
			return // the same text, refused: asked again at its retry time
		}
		delete(c.vecRefused, d.ID)
	}
	c.vecWant[d.ID] = vecWant{key: key}
	select {
	case c.vecKick <- struct{}{}:
	default:
	}
}

// removeDoc removes a tool from the index (and any pending vector). The caller holds c.mu.
func (c *Catalog) removeDoc(public string) {
	c.index.Remove(public)
	delete(c.vecWant, public)
	delete(c.vecRefused, public)
}

// vectorize attaches vectors to the tools that want one until ctx ends: from the cache, else
// from the Embedder in batches. A failing embedder is retried with backoff (lexical search
// works meanwhile). Follow runs it.
func (c *Catalog) vectorize(ctx context.Context) {
	wait := time.Second
	for {
		var n int
		var err error
		if c.spaceCheck.Swap(false) {
			c.vecProbed = false // a request's embedding was of another space: probe again
		}
		if !c.vecProbed {
			if err = c.probeSpace(ctx); err == nil && ctx.Err() == nil {
				// On to the tools wanted, without waiting for a kick: a probe that found the
				// model changed wants every tool again and kicks, but a kick another probe
				// request (a search that read the old space) spent meanwhile is not there.
				continue
			}
		} else {
			n, err = c.vectorizeBatch(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			pause := max(wait, askedHoldOff(err)) // an endpoint's Retry-After is respected
			msg := "tool embeddings failed; search is lexical for the tools without a vector"
			if errors.Is(err, errSpaceChanged) {
				c.vecProbed = false // probe again: the tools are embedded again if the model changed
				msg = "tool embeddings not used; the vector space is checked again"
			}
			c.log.Warn().Err(err).Dur("retry_in", pause).Msg(msg)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			wait = min(2*wait, time.Minute)
			continue
		case n > 0:
			wait = time.Second
			c.maybeSweepVectors()
			continue // more may be waiting
		}
		var retry <-chan time.Time // the next refused text's retry time, if any
		var timer *time.Timer
		if next, ok := c.retryRefused(); ok {
			timer = time.NewTimer(time.Until(next))
			retry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-c.vecKick:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// retryRefused wants again the refused texts whose retry time has come, and returns the
// earliest retry time of those left (ok false: none).
func (c *Catalog) retryRefused() (next time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for public, r := range c.vecRefused {
		if !r.retryAt.After(now) {
			delete(c.vecRefused, public)
			c.vecWant[public] = r
			next, ok = now, true
			continue
		}
		if !ok || r.retryAt.Before(next) {
			next, ok = r.retryAt, true
		}
	}
	return next, ok
}

// probeSpace embeds probeText and compares its vector with the one stored with the vector
// cache. The cache is keyed by the embedder's Name, which says what the configuration names
// (model, dimensions, endpoint), not what answers: a model replaced under the same name (a new
// version pulled under an Ollama tag, a gateway alias pointed at another model) makes vectors
// that must not meet the cached ones, in a ranking or in the index (whose dimension the first
// vector fixes). When the probe's vector differs (another dimension, or a cosine under
// probeMinCosine), every cached vector is deleted before any is used. It runs before the
// vectorizer attaches anything; until it succeeds no vector is attached (nor could a request be
// embedded: the endpoint fails).
func (c *Catalog) probeSpace(ctx context.Context) error {
	vecs, err := c.embed(ctx, []string{probeText, probeContrastText})
	if err != nil {
		return err
	}
	if err := degenerate(vecs[0], vecs[1]); err != nil {
		return err
	}
	name := sha256.Sum256([]byte(c.cfg.Embedder.Name()))
	var old []float32
	err = c.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyProbe))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) > len(name) && [32]byte(v[:len(name)]) == name {
				old = decodeVector(v[len(name):])
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if old != nil && !sameDirection(old, vecs[0]) {
		c.log.Warn().Msg("the embeddings endpoint answers with another model than the cached vectors were made with; they are dropped and every tool embedded again")
		if err := c.dropVectorCache(); err != nil {
			return err
		}
	}
	if old == nil || !sameDirection(old, vecs[0]) {
		if err := c.room(); err != nil {
			return err
		}
		unlock := c.writing()
		err := c.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(keyProbe), append(name[:], encodeVector(vecs[0])...))
		})
		unlock()
		if err != nil {
			return err
		}
	}
	if prev := c.space.Load(); prev == nil || !sameDirection(*prev, vecs[0]) {
		if prev != nil {
			// The model changed while the replica ran: the vectors attached are of the old
			// space. Dropped, and every tool wanted again, before the new space is used.
			c.log.Warn().Msg("the embeddings endpoint answers with another model than the attached vectors were made with; they are dropped and every tool embedded again")
			if err := c.wantAll(); err != nil {
				return err
			}
		}
		v := vecs[0]
		c.space.Store(&v)
		c.queryVecs.reset(&v)
	}
	c.vecProbed = true
	return nil
}

// errSpaceChanged is a response whose probe vector is not the space's (see embedInSpace).
var errSpaceChanged = errors.New("the embeddings endpoint answered with another model than the vectors attached were made with")

// embedInSpace embeds texts with the probe text in the same call, and returns their vectors
// only when the probe's is the vector space's (the one probeSpace established): a model
// changed under the endpoint's name while the replica runs (or a load balancer over two
// versions) must not have its vectors ranked with the attached ones.
func (c *Catalog) embedInSpace(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := c.embed(ctx, append(texts[:len(texts):len(texts)], probeText))
	if err != nil {
		return nil, err
	}
	if space := c.space.Load(); space == nil || !sameDirection(*space, vecs[len(texts)]) {
		return nil, errSpaceChanged
	}
	return vecs[:len(texts)], nil
}

// wantAll drops the attached vectors and wants one for every tool again (its text read from
// its stored definition). The vectorizer calls it: no vector is attached meanwhile.
func (c *Catalog) wantAll() error {
	type tool struct{ public, server, tool, desc string }
	c.mu.RLock()
	all := make([]tool, 0, len(c.byPublic))
	for public, e := range c.byPublic {
		desc := ""
		if e.srv != nil {
			desc = e.srv.rec.Description
		}
		all = append(all, tool{public, e.server, e.tool, desc})
	}
	c.mu.RUnlock()
	keys := make(map[string][32]byte, len(all))
	err := c.db.View(func(txn *badger.Txn) error {
		for _, t := range all {
			raw, err := readTool(txn, t.server, t.tool)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // removed since
			}
			if err != nil {
				return err
			}
			d := parseDef(raw)
			d.Name = t.tool
			keys[t.public] = c.vectorKey(embedText(searchDoc(t.public, t.server, t.desc, d)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index.ResetVectors()
	for public, key := range keys {
		if c.byPublic[public] == nil {
			continue
		}
		if _, ok := c.vecWant[public]; ok {
			continue // changed since: its own want holds its new text's key
		}
		delete(c.vecRefused, public) // perhaps not refused by the new model
		c.vecWant[public] = vecWant{key: key}
	}
	select {
	case c.vecKick <- struct{}{}:
	default:
	}
	return nil
}

// sameDirection reports whether a and b have the same dimension and a cosine of at least
// probeMinCosine.
func sameDirection(a, b []float32) bool {
	return len(a) == len(b) && cosine(a, b) >= probeMinCosine
}

// cosine is the cosine similarity of a and b (of the same length): NaN, never above anything,
// when either is zero or not finite, so no zero norm divides.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return math.NaN()
	}
	return dot / math.Sqrt(na*nb)
}

// dropVectorCache deletes every cached vector (not the probe).
func (c *Catalog) dropVectorCache() error {
	return c.deleteVectors(func([]byte) bool { return true })
}

// vecJob is a wanted tool in vectorizeBatch.
type vecJob struct {
	public       string
	want         vecWant
	server, tool string
	serverDesc   string
	text         string
	vec          []float32
	refused      bool // the endpoint refused the text: asked again later (vecRefused)
	failed       bool // the endpoint failed: still wanted, asked again after a backoff
}

// vectorizeBatch handles up to embedBatch wanted tools and reports how many wants it settled
// (0: nothing to do now; a want that changed meanwhile kicks the vectorizer again). When the
// endpoint fails, the vectors found in the cache are attached all the same, those of every
// wanted tool (see attachCached), and the error is returned with their count.
func (c *Catalog) vectorizeBatch(ctx context.Context) (int, error) {
	c.mu.RLock()
	jobs := make([]vecJob, 0, embedBatch)
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
		jobs = append(jobs, vecJob{public: public, want: w, server: e.server, tool: e.tool, serverDesc: desc})
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
	var vecs [][]float32
	var refused []error
	var embedErr error
	if len(texts) > 0 {
		// Room for the vectors' cache first: asked with the disk full, the endpoint's answer
		// (a paid request, say) was thrown away, and asked for again after every backoff.
		// Without room the batch goes as when the endpoint fails: the cached vectors are
		// attached, the others wait.
		if embedErr = c.room(); embedErr == nil {
			vecs, refused, embedErr = c.embedTexts(ctx, texts)
		}
		if embedErr != nil {
			// The vectors the cache held are attached all the same (below): they need no
			// endpoint, and a tool whose definition changed but not its text (a parameter's
			// type) would otherwise stay lexical for the whole outage. The others stay wanted.
			for _, i := range missing {
				jobs[i].failed = true
			}
			missing = nil
		}
	}
	if len(missing) > 0 {
		if err := c.room(); err != nil {
			return 0, err
		}
		unlock := c.writing()
		wb := c.db.NewWriteBatch()
		for j, i := range missing {
			if refused[j] == nil && !usableVector(vecs[j]) {
				// Zero or not finite: the index would refuse it. Not cached, as a refusal.
				c.badVectors.Add(1)
				refused[j] = errors.New("the embedder returned a zero or non-finite vector")
			}
			if refused[j] != nil {
				// Not cached: set aside below, and asked again after a hold-off (or once the
				// tool's text changes), not forever lexical and not at every batch either.
				jobs[i].refused = true
				c.log.Warn().Err(refused[j]).Str("server", jobs[i].server).Str("tool", jobs[i].tool).
					Msg("the embeddings endpoint refused this tool's text; it is found lexically only until it is asked again")
				continue
			}
			jobs[i].vec = vecs[j]
			if err := wb.Set(append([]byte(pfxVector), jobs[i].want.key[:]...), encodeVector(vecs[j])); err != nil {
				wb.Cancel()
				unlock()
				return 0, err
			}
		}
		err := wb.Flush()
		unlock()
		if err != nil {
			return 0, err
		}
		for _, i := range missing {
			if !jobs[i].refused {
				c.vecWritten++
			}
		}
	}
	done := c.attachJobs(jobs)
	if embedErr != nil && ctx.Err() == nil && !errors.Is(embedErr, errSpaceChanged) {
		// A batch holds at most embedBatch wants, picked in no order, and the next is tried
		// after a backoff (up to a minute, or an endpoint's Retry-After): among many texts the
		// endpoint has not embedded, a cached one would wait for the batches that happen to
		// pick it, one per backoff. (Not when another model answered: the space is probed
		// again first, and its vectors may all be dropped.)
		n, err := c.attachCached()
		if err != nil {
			return done, errors.Join(embedErr, err)
		}
		done += n
	}
	return done, embedErr
}

// attachJobs attaches the vectors of a batch's jobs and reports how many wants it settled.
func (c *Catalog) attachJobs(jobs []vecJob) int {
	// Attach, unless the tool changed (or left) meanwhile: then its new text is wanted instead.
	// A want that cannot be met (its definition no longer gives its text) is dropped: the
	// tool's next change asks again.
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for _, j := range jobs {
		if cur, ok := c.vecWant[j.public]; !ok || cur.key != j.want.key || j.failed {
			continue
		}
		delete(c.vecWant, j.public)
		done++
		if j.refused {
			w := max(c.refusedRetry, min(2*j.want.wait, refusedRetryMax))
			c.vecRefused[j.public] = vecWant{key: j.want.key, retryAt: time.Now().Add(w), wait: w}
			continue
		}
		if j.vec != nil && !c.index.SetVector(j.public, j.vec) {
			c.badVectors.Add(1)
		}
	}
	return done
}

// attachCached attaches the cached vectors of every wanted tool, without the endpoint, and
// reports how many it attached. The vectorizer calls it when the endpoint failed; a want
// whose text is not cached is left to the batches.
func (c *Catalog) attachCached() (int, error) {
	c.mu.RLock()
	keys := make(map[string][32]byte, len(c.vecWant))
	for public, w := range c.vecWant {
		keys[public] = w.key
	}
	c.mu.RUnlock()
	found := map[string][]float32{}
	err := c.db.View(func(txn *badger.Txn) error {
		for public, key := range keys {
			item, err := txn.Get(append([]byte(pfxVector), key[:]...))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				if vec := decodeVector(v); vec != nil {
					found[public] = vec
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for public, vec := range found {
		if cur, ok := c.vecWant[public]; !ok || cur.key != keys[public] || c.byPublic[public] == nil {
			continue // changed (or left) meanwhile: its new want follows
		}
		delete(c.vecWant, public)
		done++
		if !c.index.SetVector(public, vec) {
			c.badVectors.Add(1)
		}
	}
	return done, nil
}

// embedTexts embeds the texts of tools in one call. When the endpoint refuses the batch for
// what it holds (see refusedInput: a text longer than the model takes, say), each text is
// embedded alone, so that one tool's text does not keep the others of its batch from their
// vectors forever: refused[i] is then the error of a text refused alone (and vecs[i] nil).
// When no text of a batch of several is embedded alone either, or the probe text alone is not
// embedded after a batch of one text was refused, the endpoint refuses everything (a bad
// request format, a proxy's error page in an outage, say): that is the call's error, and every
// want stays.
func (c *Catalog) embedTexts(ctx context.Context, texts []string) (vecs [][]float32, refused []error, err error) {
	refused = make([]error, len(texts))
	vecs, err = c.embedInSpace(ctx, texts)
	if err == nil || !refusedInput(err) {
		return vecs, refused, err
	}
	if len(texts) == 1 {
		// No other text to tell a refused text from an endpoint that refuses everything now
		// (a proxy's error page, with 200 or 400, in an outage): the probe text alone does.
		if _, e := c.embed(ctx, []string{probeText}); e != nil {
			return nil, nil, err
		}
		refused[0] = err
		return make([][]float32, 1), refused, nil
	}
	vecs = make([][]float32, len(texts))
	embedded := false
	for i, text := range texts {
		v, e := c.embedInSpace(ctx, []string{text})
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
	return errors.As(err, &e) && e.Code == embeddings.CodeMalformed || refusedText(err)
}

// refusedText reports whether err is an error status the endpoint answers to a text it will
// not embed: HTTP 400, 413 or 422 (see refusedInput). Unlike a malformed 2xx answer, which
// embeds no text at all, such an answer says nothing of the next request's text.
func refusedText(err error) bool {
	var e *embeddings.Error
	return errors.As(err, &e) && e.Code == embeddings.CodeRejected &&
		(e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge ||
			e.Status == http.StatusUnprocessableEntity)
}

// queryVector embeds a search request of pr (nil when there is no Embedder or it fails in time).
func (c *Catalog) queryVector(ctx context.Context, pr subjects.Principal, query string) []float32 {
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
	// The cache is per tenant and user: it is read before the endpoint's hold-off and
	// busy checks, so a cached query ranks hybrid while any other is lexical, and shared it
	// told one principal which exact query another had run lately.
	key := queryCacheKey(pr, query)
	if v, ok := c.queryVecs.get(key); ok {
		return v
	}
	if !c.embedDown.try(timeout) {
		return nil // the embedder failed lately: lexical at once, not after its timeout
	}
	select {
	case c.embedWaits <- struct{}{}:
		defer func() { <-c.embedWaits }()
	default:
		// Half the workers wait on the endpoint already (a slow one): lexical at once, so that
		// search never depends on the endpoint.
		return nil
	}
	space := c.space.Load()
	if space == nil {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// With the probe text: a vector is ranked against the tools' only when the response's
	// probe vector is theirs (see embedInSpace).
	vecs, err := c.cfg.Embedder.Embed(qctx, []string{query, probeText})
	switch {
	case err != nil:
	case len(vecs) != 2:
		err = errors.New("the embedder returned a different number of vectors")
	case !usableVector(vecs[1]):
		// Not another model (whose probe vector has a direction, see degenerate): an
		// endpoint that embeds nothing, zeros for every text say, fails like a malformed
		// answer. Taken for another model, it would be asked again by every search.
		err = errors.New("the embedder returned a zero or non-finite vector for the probe text sent with the request")
	case !sameDirection(*space, vecs[1]):
		// Another model answers: lexical, and the vectorizer probes the space again.
		c.embedDown.ok()
		c.spaceCheck.Store(true)
		select {
		case c.vecKick <- struct{}{}:
		default:
		}
		c.log.Debug().Msg("the embeddings endpoint answered with another model than the tools' vectors; lexical search only")
		return nil
	case !usableVector(vecs[0]):
		// The probe text's vector is fine (the same model, a working endpoint): the index
		// could not rank with this text's (search would ignore it), so it is neither used nor
		// cached. Like a 400 for this text, it says nothing of other searchers' texts: a
		// query that embeds to nothing must not switch hybrid search off for everyone.
		c.embedErrors.Add(1)
		c.embedDown.ok()
		c.log.Debug().Msg("the embedder returned a zero or non-finite vector for the request; lexical search only")
		return nil
	}
	if err != nil {
		c.embedErrors.Add(1)
		switch {
		case refusedText(err):
			// The endpoint answered, refusing this request's text (too long for the model,
			// say): no reason to keep the next requests, other searchers', from it.
			c.embedDown.ok()
		case ctx.Err() == nil:
			// The endpoint's failure, not a caller that stopped waiting: an error, a timeout,
			// or an answer that embeds no text, not even the probe text the endpoint embedded
			// before (a malformed 2xx: a proxy's error page, a wrong count or dimension).
			// Searches are lexical at once for the hold-off: warned about once per hold-off
			// (by each search that was waiting on the endpoint when it failed).
			wait := c.embedDown.fail(max(c.embedRetryMin, askedHoldOff(err)))
			c.log.Warn().Err(err).Dur("retry_in", wait).Msg("query embedding failed; searches are lexical without asking the endpoint until retry_in has passed")
			return nil
		}
		c.log.Debug().Err(err).Msg("query embedding failed; lexical search only")
		return nil
	}
	c.embedDown.ok()
	c.queryVecs.putIn(space, key, vecs[0])
	return vecs[0]
}

// queryCacheKey is the request cache's key of query searched by pr (lengths first: no two
// principals' keys meet whatever their names hold).
func queryCacheKey(pr subjects.Principal, query string) string {
	return strconv.Itoa(len(pr.Tenant)) + ":" + pr.Tenant + strconv.Itoa(len(pr.User)) + ":" + pr.User + query
}

// askedHoldOff is how long the endpoint asked to be left alone with err (a 429 or 503's
// Retry-After, at most an hour: embeddings.Error.RetryAfter), 0 when it did not say.
func askedHoldOff(err error) time.Duration {
	var e *embeddings.Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
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

// fail starts a hold-off of at least floor, twice the last one (up to embedRetryMax), and
// returns it.
func (b *breaker) fail(floor time.Duration) time.Duration {
	w := max(floor, min(2*time.Duration(b.wait.Load()), embedRetryMax))
	b.wait.Store(int64(w))
	b.until.Store(time.Now().Add(w).UnixNano())
	return w
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
	space *[]float32 // the vector space of the entries (see putIn)
}

// reset empties the cache for the vector space space.
func (vc *vecCache) reset(space *[]float32) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.byKey, vc.order, vc.space = nil, nil, space
}

// putIn puts vec, embedded in space, unless the cache is of another space now.
func (vc *vecCache) putIn(space *[]float32, key string, vec []float32) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.space == space {
		vc.putLocked(key, vec)
	}
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
	vc.putLocked(key, vec)
}

func (vc *vecCache) putLocked(key string, vec []float32) {
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

// usableVector reports whether v is a vector the index takes: not empty, finite and not zero.
func usableVector(v []float32) bool {
	nonZero := false
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return false
		}
		nonZero = nonZero || f != 0
	}
	return nonZero
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

// The vector cache is swept (sweepVectors) at Open, and while the replica runs whenever the
// vectorizer has cached more vectors since the last sweep than there are tools, plus
// vectorSweepSlack: tools whose texts change at every listing (a timestamp in a description)
// leave a vector per listing behind, which would otherwise pile up on disk until a restart.
// The cache thus holds at most about twice the tools plus vectorSweepSlack (and a batch), and a
// sweep's cost, proportional to the cache, is spread over as many cached vectors.
const vectorSweepSlack = 256

// sweepChunk bounds the deletions of a sweep made under one read lock of c.mu.
const sweepChunk = 1024

// maybeSweepVectors sweeps the vector cache when enough vectors were cached since the last
// sweep (see vectorSweepSlack). The vectorizer calls it: it is the cache's only writer.
func (c *Catalog) maybeSweepVectors() {
	c.mu.RLock()
	tools := len(c.byPublic)
	c.mu.RUnlock()
	if c.vecWritten <= tools+vectorSweepSlack {
		return
	}
	if err := c.sweepVectors(); err != nil {
		// Tried again after as many vectors cached again; the cache is derived data.
		c.log.Warn().Err(err).Msg("sweeping the vector cache failed")
	}
}

// sweepVectors deletes the cached vectors no current tool's text has (nor a pending or refused
// want). It runs at Open, before anything else, and in the vectorizer (maybeSweepVectors), the
// cache's only writer, while Follow applies changes: the stale keys are collected without
// c.mu, then deleted in chunks each under c.mu's read lock, checked again against the tools'
// keys of that moment when any tool's text changed meanwhile (vecGen). A vector a current tool
// needs is thus never deleted (one a tool needed again only later, its text changed back, is
// embedded again).
func (c *Catalog) sweepVectors() error {
	if c.cfg.Embedder == nil {
		return nil
	}
	c.vecWritten = 0
	c.mu.RLock()
	keep, gen := c.liveVectorKeys(), c.vecGen
	c.mu.RUnlock()
	stale, err := c.vectorKeys(func(k []byte) bool { return !keepVector(keep, k) })
	for err == nil && len(stale) > 0 {
		chunk := stale[:min(len(stale), sweepChunk)]
		stale = stale[len(chunk):]
		err = func() error {
			// storeMu before c.mu, never while holding it: a value log GC step holds storeMu
			// for a whole file's rewrite, and a sweep waiting for it under c.mu's read lock
			// would hold up Follow's next c.mu.Lock, and every query queued behind that.
			if err := c.room(); err != nil {
				return err
			}
			defer c.writing()()
			c.mu.RLock()
			defer c.mu.RUnlock()
			if c.vecGen != gen {
				keep, gen = c.liveVectorKeys(), c.vecGen
			}
			wb := c.db.NewWriteBatch()
			for _, k := range chunk {
				if keepVector(keep, k) {
					continue
				}
				if err := wb.Delete(k); err != nil {
					wb.Cancel()
					return err
				}
			}
			return wb.Flush()
		}()
	}
	return err
}

// liveVectorKeys is the set of the cache keys of the current tools' texts, wanted, refused or
// attached. The caller holds c.mu.
func (c *Catalog) liveVectorKeys() map[[32]byte]bool {
	keep := make(map[[32]byte]bool, len(c.byPublic))
	for _, e := range c.byPublic {
		keep[e.vkey] = true
	}
	for _, w := range c.vecWant {
		keep[w.key] = true
	}
	for _, w := range c.vecRefused {
		keep[w.key] = true
	}
	return keep
}

// keepVector reports whether the cache key k (pfxVector and a sha256) is in keep.
func keepVector(keep map[[32]byte]bool, k []byte) bool {
	return len(k) == len(pfxVector)+32 && keep[[32]byte(k[len(pfxVector):])]
}

// deleteVectors deletes the cached vectors whose keys stale says are stale (never the probe).
func (c *Catalog) deleteVectors(isStale func(key []byte) bool) error {
	stale, err := c.vectorKeys(isStale)
	if err != nil || len(stale) == 0 {
		return err
	}
	if err := c.room(); err != nil {
		return err
	}
	defer c.writing()()
	wb := c.db.NewWriteBatch()
	for _, k := range stale {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return err
		}
	}
	return wb.Flush()
}

// vectorKeys returns (copies of) the keys of the cached vectors that stale says are stale,
// never the probe's.
func (c *Catalog) vectorKeys(stale func(key []byte) bool) ([][]byte, error) {
	var keys [][]byte
	err := c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(pfxVector)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if string(k) != keyProbe && stale(k) {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	return keys, err
}
