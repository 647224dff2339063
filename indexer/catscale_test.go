package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// bigTool is a definition of about size bytes: its inputSchema holds a long description.
func bigTool(name string, size int) json.RawMessage {
	schema := fmt.Sprintf(`{"type":"object","description":%q,"properties":{}}`, strings.Repeat("y", size))
	return tool(name, "a tool with a large schema", "inputSchema", schema)
}

// TestRepliesLargerThanAMessage: a details or full search answer larger than a NATS message may
// be (definitions up to 512 KiB each, inputSchema and definition both given) could not be
// published: the replica logged it at debug level and the client waited for its timeout, as if
// no replica ran. It is answered too_large, at once, saying to ask for less.
func TestRepliesLargerThanAMessage(t *testing.T) {
	env := natstest.Start(t)
	var items []json.RawMessage
	var names []string
	for i := range 12 {
		items = append(items, bigTool(fmt.Sprintf("big%d", i), 400<<10))
		names = append(names, fmt.Sprintf("huge__big%d", i))
	}
	seq := publish(t, env.JS, status("huge", subjects.StatusReady), snapshot("huge", "huge schemas", items...))
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 20 * time.Second}
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
		return err == nil
	})

	// One name fits: answered in full.
	one, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: names[:1]})
	if err != nil || one.Error != nil || len(one.Tools) != 1 || len(one.Tools[0].Definition) < 400<<10 {
		t.Fatalf("one name: err %v, reply error %+v, %d tools", err, one.Error, len(one.Tools))
	}

	det, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: names})
	if err != nil {
		t.Fatalf("details of %d large tools: %v (want a too_large reply, not silence)", len(names), err)
	}
	if det.Error == nil || det.Error.Code != subjects.CodeTooLarge {
		t.Fatalf("details of %d large tools: error %+v, %d tools; want too_large", len(names), det.Error, len(det.Tools))
	}
	s, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "select:" + strings.Join(names, ","), K: MaxK, Detail: subjects.DetailFull})
	if err != nil {
		t.Fatalf("full search of %d large tools: %v (want a too_large reply, not silence)", len(names), err)
	}
	if s.Error == nil || s.Error.Code != subjects.CodeTooLarge {
		t.Fatalf("full search of %d large tools: error %+v, %d tools; want too_large", len(names), s.Error, len(s.Tools))
	}
	if st := r.Stats().Endpoints["details"]; st.Errors == 0 {
		t.Errorf("details endpoint errors %d, want the too_large reply counted", st.Errors)
	}
}

// TestTooLargeReplyReadsOnlyWhatCouldBeSent: a details request naming many large definitions,
// or a full search at a high k, is answered too_large (TestRepliesLargerThanAMessage); the
// replica read, decompressed and parsed every definition named, built the whole reply and
// encoded it before finding it too large: about 100 MB allocated for one request of 2 KB with
// 100 definitions of 250 KiB and messages of 8 MiB (and as much again for each worker doing the
// same at once). It stops reading once what it read already could not be sent, still saying
// too_large.
func TestTooLargeReplyReadsOnlyWhatCouldBeSent(t *testing.T) {
	// A NATS message of at most 1 MiB, so that a few MB of definitions (quick to index under
	// -race) are several times what a reply may hold.
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	var evs []any
	var names []string
	for s := range 4 {
		var items []json.RawMessage
		for i := range 8 {
			items = append(items, bigTool(fmt.Sprintf("big%d", i), 100<<10))
			names = append(names, fmt.Sprintf("huge%d__big%d", s, i))
		}
		evs = append(evs, status(fmt.Sprintf("huge%d", s), subjects.StatusReady), snapshot(fmt.Sprintf("huge%d", s), "huge schemas", items...))
	}
	seq := publish(t, env.JS, evs...)
	nc := env.Connect(t)
	r := startReplica(t, env, "", nil, nc)
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 60 * time.Second}
	ctx := context.Background()
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(ctx, "local", subjects.ServersRequest{V: 1})
		return err == nil
	})
	// Allocated by the process (the replica, and the NATS server carrying a small request
	// and a small reply) while one request is answered; the least of three.
	allocated := func(ask func() (*subjects.Error, int, error)) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			apiErr, tools, err := ask()
			runtime.ReadMemStats(&after)
			if err != nil || apiErr == nil || apiErr.Code != subjects.CodeTooLarge || tools != 0 {
				t.Fatalf("err %v, reply error %+v, %d tools: want a too_large reply", err, apiErr, tools)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	bound := uint64(3 * nc.MaxPayload())
	details := allocated(func() (*subjects.Error, int, error) {
		rep, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: names})
		return rep.Error, len(rep.Tools), err
	})
	search := allocated(func() (*subjects.Error, int, error) {
		rep, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "select:" + strings.Join(names, ","), K: MaxK, Detail: subjects.DetailFull})
		return rep.Error, len(rep.Tools), err
	})
	t.Logf("allocated while answering too_large: details %d MB, full search %d MB (bound %d MB)", details>>20, search>>20, bound>>20)
	for what, n := range map[string]uint64{"details": details, "full search": search} {
		if n > bound {
			t.Errorf("a too_large %s allocated %d MB, more than 3 replies could hold (%d MB)", what, n>>20, bound>>20)
		}
	}
}

// slowQueryEmbedder embeds tools at once and holds the embedding of one query text until
// release is closed (an endpoint that is slow for one request).
type slowQueryEmbedder struct {
	conceptEmbedder
	slow    string
	entered chan struct{} // closed when the slow text is being embedded
	once    sync.Once
	release chan struct{}
}

func (e *slowQueryEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) > 0 && texts[0] == e.slow { // a request: its text, then the probe
		e.once.Do(func() { close(e.entered) })
		select {
		case <-e.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.conceptEmbedder.Embed(ctx, texts)
}

// TestSlowEmbeddingHoldsNoOtherSearch: a search with nothing queued behind it was served on
// the subscription's own goroutine; in hybrid mode that goroutine then waited for the
// embeddings endpoint (up to EmbedTimeout), and every search that came meanwhile waited
// behind it, although workers were free. A search that may wait on the endpoint is served on
// a worker of its own.
func TestSlowEmbeddingHoldsNoOtherSearch(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &slowQueryEmbedder{slow: "will it rain tomorrow", entered: make(chan struct{}), release: make(chan struct{})}
	r := startReplicaConfig(t, env, Config{Embedder: emb, EmbedTimeout: time.Minute}, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
		return err == nil
	})

	slowDone := make(chan error, 1)
	go func() {
		rep, err := Client{NC: env.Connect(t), Timeout: time.Minute}.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: emb.slow})
		if err == nil && rep.Error != nil {
			err = fmt.Errorf("%s: %s", rep.Error.Code, rep.Error.Message)
		}
		slowDone <- err
	}()
	defer func() {
		close(emb.release)
		if err := <-slowDone; err != nil {
			t.Errorf("slow search: %v", err)
		}
	}()
	select {
	case <-emb.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow search never reached the embedder")
	}
	// The slow search is waiting for the endpoint; another search needs no embedding.
	rep, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "select:desk__open_incident"})
	if err != nil {
		t.Fatalf("a search while another waits for the embeddings endpoint: %v", err)
	}
	if rep.Error != nil || len(rep.Tools) != 1 {
		t.Fatalf("select: error %+v, tools %v", rep.Error, names(rep.Tools))
	}
}

// allQueriesSlowEmbedder embeds tool texts at once and holds the embedding of every query
// text in slow until release is closed (an endpoint that has become slow).
type allQueriesSlowEmbedder struct {
	conceptEmbedder
	slow    map[string]bool
	waiting atomic.Int64
	release chan struct{}
}

func (e *allQueriesSlowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) > 0 && e.slow[texts[0]] { // a request: its text, then the probe
		e.waiting.Add(1)
		defer e.waiting.Add(-1)
		select {
		case <-e.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.conceptEmbedder.Embed(ctx, texts)
}

// TestSlowEndpointHoldsHalfTheWorkers: with a slow embeddings endpoint every hybrid search
// waited on it (up to EmbedTimeout), each on a worker, until every worker waited and details,
// servers and lexical searches waited too. At most half the workers wait for query embeddings;
// a search past that is answered lexically at once.
func TestSlowEndpointHoldsHalfTheWorkers(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &allQueriesSlowEmbedder{release: make(chan struct{}), slow: map[string]bool{"will it rain tomorrow": true, "open an incident": true}}
	r := startReplicaConfig(t, env, Config{Embedder: emb, EmbedTimeout: time.Minute, Workers: 2}, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
		return err == nil
	})

	slowDone := make(chan error, 1)
	go func() {
		_, err := Client{NC: env.Connect(t), Timeout: time.Minute}.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "will it rain tomorrow"})
		slowDone <- err
	}()
	defer func() {
		close(emb.release)
		if err := <-slowDone; err != nil {
			t.Errorf("slow search: %v", err)
		}
	}()
	waitFor(t, "a search waits for the endpoint", func() bool { return emb.waiting.Load() == 1 })
	rep, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "open an incident"})
	if err != nil || rep.Error != nil {
		t.Fatalf("a second search while one waits for the endpoint: %v %+v", err, rep.Error)
	}
	if n := emb.waiting.Load(); n != 1 {
		t.Errorf("%d searches wait for the endpoint, want 1 (half of 2 workers)", n)
	}
}

// TestSlowEmbeddingHoldsNoOtherDetails: a details request naming a tool nobody lists searches
// for what it probably meant (searchSuggestions), and on a hybrid replica that search embeds
// the name: it may wait for the embeddings endpoint (up to EmbedTimeout). Details were served
// on the subscription's own goroutine when nothing was queued behind them, so every details
// request that came meanwhile (any client's, naming tools that exist) waited behind it,
// although workers were free.
func TestSlowEmbeddingHoldsNoOtherDetails(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, hybridEvents()...)
	emb := &slowQueryEmbedder{slow: "desk__open_incidnt_typo", entered: make(chan struct{}), release: make(chan struct{})}
	r := startReplicaConfig(t, env, Config{Embedder: emb, EmbedTimeout: time.Minute}, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	waitVectors(t, r.Catalog, 3)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
		return err == nil
	})

	slowDone := make(chan error, 1)
	go func() {
		rep, err := Client{NC: env.Connect(t), Timeout: time.Minute}.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: []string{emb.slow}})
		if err == nil && (rep.Error == nil || rep.Error.Code != subjects.CodeNotFound) {
			err = fmt.Errorf("details of a name nobody lists: %+v, want not_found", rep.Error)
		}
		slowDone <- err
	}()
	defer func() {
		close(emb.release)
		if err := <-slowDone; err != nil {
			t.Errorf("slow details: %v", err)
		}
	}()
	select {
	case <-emb.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the details request never reached the embedder")
	}
	// The first details request waits for the endpoint; this one needs no embedding.
	rep, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: []string{"desk__open_incident"}})
	if err != nil {
		t.Fatalf("details while another details request waits for the embeddings endpoint: %v", err)
	}
	if rep.Error != nil || len(rep.Tools) != 1 {
		t.Fatalf("details: error %+v, tools %v", rep.Error, names(rep.Tools))
	}
}
