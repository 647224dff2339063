package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/search"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "eval",
		summary: "measure retrieval quality of the catalog search (eval retrieval)",
		run:     runEval,
	})
}

const evalHelp = `
eval retrieval loads a tool catalog through the real indexing path and runs every query through
the real search path, then prints retrieval quality:

  1. an embedded NATS server with JetStream starts in a temporary directory (no TCP listener);
  2. each server of --tools is published to the registry stream as one tools snapshot (items
     {name, description, inputSchema} as in the file; the server's description from
     server_description), after a "ready" status;
  3. an indexer replica (Badger in a temporary directory) replays the stream and serves the
     catalog service;
  4. every query of --queries is sent as a catalog search request over NATS (local principal,
     k = --k), and the ranked public names are scored against the query's gold groups
     ("server::name" mapped to the public name server__name).

Metrics (group-aware, the definitions of testdata/eval/retrieval/PROVENANCE.md):
  recall@k     share of a query's gold groups with a member in the top k (k = 1, 5, 10)
  complete@k   1 when every gold group has a member in the top k (k = 5, 10)
  ndcg@10      binary gain per group at the rank of its first member, normalized
  mrr          1 / rank of the first gold tool
each averaged over the queries that have gold groups.

--tools: JSON lines {"id","server","server_description","name","description","inputSchema"}.
--queries: JSON lines {"id","query","gold_groups":[["server::name",...],...]} (gold_tools, each
its own group, when gold_groups is absent). Refused, naming the file and line: a tool listed twice,
a gold id that is no tool of --tools, an empty gold group, an empty file, queries none of which
has gold.
--json prints {"queries","recall@1","recall@5","recall@10","complete@5","complete@10","ndcg@10","mrr"}.
--per-query also prints each query's top results (* marks a gold tool).
--embeddings-url and --embeddings-model make the search hybrid (lexical fused with vectors from an
OpenAI-compatible embeddings API; the key is read from the variable --embeddings-key-env names):
the endpoint is asked once first (eval stops with its error, or when its vectors are zero, not
finite or the same for every text), every tool is embedded before the
queries run, and queries ranked lexically (their embedding failed) are counted on stderr.

Example:
  mcpstream eval retrieval --tools testdata/eval/retrieval/tools.jsonl \
      --queries testdata/eval/retrieval/queries-dev.jsonl   # from the repository's root`

// evalTool is one line of the --tools file.
type evalTool struct {
	ID                string          `json:"id"`
	Server            string          `json:"server"`
	ServerDescription string          `json:"server_description"`
	Name              string          `json:"name"`
	Description       string          `json:"description"`
	InputSchema       json.RawMessage `json:"inputSchema"`
}

// evalQuery is one line of the --queries file.
type evalQuery struct {
	ID         string     `json:"id"`
	Query      string     `json:"query"`
	GoldGroups [][]string `json:"gold_groups"`
	GoldTools  []string   `json:"gold_tools"`
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "retrieval" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprintf(stdout, "Usage: mcpstream eval retrieval --tools FILE --queries FILE [flags]\n\n%s\n", strings.TrimSpace(evalHelp))
			return nil
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "mcpstream eval: unknown evaluation %q (the one there is: retrieval)\n", args[0])
		}
		fmt.Fprintf(stderr, "Usage: mcpstream eval retrieval --tools FILE --queries FILE [flags]\n")
		return exitCode(2)
	}
	fs := newFlagSet("eval retrieval", "eval retrieval --tools FILE --queries FILE [flags]", evalHelp)
	toolsPath := fs.String("tools", "", "tool catalog, JSON lines (required)")
	queriesPath := fs.String("queries", "", "queries with gold groups, JSON lines (required)")
	k := fs.Int("k", 10, fmt.Sprintf("results per query, 1..%d (metrics @10 need 10)", indexer.MaxK))
	asJSON := fs.Bool("json", false, "print the metrics as one JSON object")
	perQuery := fs.Bool("per-query", false, "print each query's results")
	embURL := fs.String("embeddings-url", "", "hybrid search: base URL of an OpenAI-compatible embeddings API (POST URL/embeddings)")
	embModel := fs.String("embeddings-model", "", "hybrid search: the embeddings model")
	embKeyEnv := fs.String("embeddings-key-env", "", "hybrid search: name of the environment variable holding the API key")
	embDims := fs.Int("embeddings-dimensions", 0, "hybrid search: dimensions to ask the model for (0: its default)")
	rest, err := parseFlags(fs, args[1:], stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *toolsPath == "" || *queriesPath == "" {
		msg := "--tools and --queries are required"
		if len(rest) > 0 {
			msg = fmt.Sprintf("unexpected argument %q", rest[0])
		}
		usageError(fs, stderr, msg, nil)
		return exitCode(2)
	}
	if *k < 1 || *k > indexer.MaxK {
		usageError(fs, stderr, fmt.Sprintf("--k %d out of range 1..%d", *k, indexer.MaxK), nil)
		return exitCode(2)
	}
	// The embeddings flags: checked before the files are read, as the configuration file's
	// search.embeddings section is at load (dimensions: the same range).
	switch {
	case (*embURL == "") != (*embModel == ""):
		usageError(fs, stderr, "--embeddings-url and --embeddings-model go together", nil)
		return exitCode(2)
	case *embURL == "" && (*embKeyEnv != "" || *embDims != 0):
		usageError(fs, stderr, "--embeddings-key-env and --embeddings-dimensions need --embeddings-url and --embeddings-model", nil)
		return exitCode(2)
	case *embDims < 0 || *embDims > maxEmbeddingDimensions:
		usageError(fs, stderr, fmt.Sprintf("--embeddings-dimensions %d out of range 0..%d (0: the model's default)", *embDims, maxEmbeddingDimensions), nil)
		return exitCode(2)
	}
	// The catalog's ids ("server::name"), each with the line it is on: a tool listed twice is
	// ambiguous (which description is the tool's?), and a gold id the catalog lacks (a typo)
	// would count as a miss and silently lower every figure.
	lineOf := map[string]int{}
	tools, err := readJSONLines(*toolsPath, func(t evalTool, line int) error {
		if t.Server == "" || t.Name == "" {
			return errors.New(`a tool needs "server" and "name" (is this a --tools file?)`)
		}
		id := evalToolID(t)
		if first, ok := lineOf[id]; ok {
			return fmt.Errorf("tool %q again (first on line %d)", termClip(id, 128), first)
		}
		lineOf[id] = line
		return nil
	})
	if err != nil {
		return err
	}
	if len(tools) == 0 {
		return fmt.Errorf("%s: no tools", *toolsPath)
	}
	withGold := 0
	queries, err := readJSONLines(*queriesPath, func(q evalQuery, _ int) error {
		if strings.TrimSpace(q.Query) == "" {
			return errors.New(`a query needs "query" (is this a --queries file?)`)
		}
		groups := evalGroups(q)
		for i, g := range groups {
			if len(g) == 0 {
				return fmt.Errorf("query %s: gold group %d is empty: no tool can satisfy it", termClip(q.ID, 128), i+1)
			}
			for _, id := range g {
				if _, ok := lineOf[id]; !ok {
					return fmt.Errorf(`query %s: gold tool %q is not in the catalog (no tool of --tools is that "server::name")`, termClip(q.ID, 128), termClip(id, 128))
				}
			}
		}
		if len(groups) > 0 {
			withGold++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(queries) == 0 {
		return fmt.Errorf("%s: no queries", *queriesPath)
	}
	if withGold == 0 {
		return fmt.Errorf("%s: no query has gold_groups or gold_tools: nothing to measure", *queriesPath)
	}
	var emb indexer.Embedder
	if *embURL != "" || *embModel != "" {
		key := ""
		if *embKeyEnv != "" {
			v, ok := os.LookupEnv(*embKeyEnv)
			if !ok {
				return fmt.Errorf("eval: --embeddings-key-env: %s is not set", *embKeyEnv)
			}
			key = v
		}
		ec := &embeddings.Client{BaseURL: *embURL, Model: *embModel, APIKey: key, Dimensions: *embDims}
		// One request first, the replica's probe: the replica retries a failing endpoint
		// without end (its log is discarded here), so a wrong key, URL, model or dimension,
		// or vectors it cannot rank with (zero, or the same for every text), would otherwise
		// cost the ten minutes eval waits for tool vectors, and say nothing of why.
		pctx, cancel := context.WithTimeout(ctx, time.Minute) // a model loaded on first use, too
		err := indexer.CheckEmbedder(pctx, ec)
		cancel()
		if err != nil {
			return fmt.Errorf("eval: the embeddings endpoint: %w", err)
		}
		emb = ec
	}
	res, err := evalRetrieval(ctx, tools, queries, *k, emb, stderr)
	if err != nil {
		return err
	}
	if *perQuery {
		for i, q := range queries {
			gold := map[string]bool{}
			for _, g := range res.gold[i] {
				for _, n := range g {
					gold[n] = true
				}
			}
			fmt.Fprintf(stdout, "%s %s\n", termClip(q.ID, 128), termClip(q.Query, 100))
			for r, n := range res.results[i] {
				mark := " "
				if gold[n] {
					mark = "*"
				}
				fmt.Fprintf(stdout, "  %s%2d %s\n", mark, r+1, n)
			}
		}
	}
	m := res.metrics
	if *asJSON {
		return printJSON(stdout, m)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "queries\t%d\t(%d tools, %d servers)\n", m.Queries, len(tools), res.servers)
	for _, row := range []struct {
		name string
		v    float64
	}{{"recall@1", m.RecallAt1}, {"recall@5", m.RecallAt5}, {"recall@10", m.RecallAt10},
		{"complete@5", m.CompleteAt5}, {"complete@10", m.CompleteAt10}, {"ndcg@10", m.NDCGAt10}, {"mrr", m.MRR}} {
		fmt.Fprintf(tw, "%s\t%.3f\n", row.name, row.v)
	}
	return tw.Flush()
}

// evalEmbedTimeout bounds eval's embedding of a query (the replica's EmbedTimeout): longer than
// a search's default, for an endpoint on a CPU.
const evalEmbedTimeout = 30 * time.Second

type evalResult struct {
	metrics search.Metrics
	results [][]string   // per query: public names, best first
	gold    [][][]string // per query: groups of public names
	servers int
}

// evalRetrieval runs the evaluation through embedded NATS, an indexer replica and the catalog
// service.
func evalRetrieval(ctx context.Context, tools []evalTool, queries []evalQuery, k int, emb indexer.Embedder, warn io.Writer) (evalResult, error) {
	var out evalResult
	tmp, err := os.MkdirTemp("", "mcpstream-eval-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(tmp)
	srv, err := natsembed.Start(natsembed.Config{StoreDir: tmp + "/nats", Listen: "none"})
	if err != nil {
		return out, err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		return out, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return out, err
	}
	if err := subjects.EnsureStreams(ctx, js, subjects.StreamOptions{}); err != nil {
		return out, err
	}

	// One snapshot per server, in the order servers first appear.
	var order []string
	byServer := map[string][]evalTool{}
	for _, t := range tools {
		if _, ok := byServer[t.Server]; !ok {
			order = append(order, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	out.servers = len(order)
	var last uint64
	for _, name := range order {
		sn := evalSnapshot(name, byServer[name])
		st := subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: name, Status: subjects.StatusReady, At: sn.ListedAt}
		for _, m := range []struct {
			subject string
			v       any
		}{{subjects.RegistryStatus(name), st}, {subjects.RegistrySnapshot(name, subjects.KindTools), sn}} {
			data, err := json.Marshal(m.v)
			if err != nil {
				return out, err
			}
			ack, err := js.Publish(ctx, m.subject, data)
			if err != nil {
				return out, fmt.Errorf("publish %s: %w", name, err)
			}
			last = ack.Sequence
		}
	}

	icfg := indexer.Config{Dir: tmp + "/catalog", Log: zerolog.Nop(), Replica: "eval", Embedder: emb, EmbedTimeout: evalEmbedTimeout}
	cat, err := indexer.Open(icfg)
	if err != nil {
		return out, err
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 2)
	go func() { errc <- cat.Follow(rctx, js) }()
	go func() { errc <- cat.Serve(rctx, nc) }()
	defer func() {
		cancel()
		<-errc
		<-errc
		cat.Close()
	}()
	// Wait (bounded) until the replica has applied everything and serves.
	// Longer than a query's embedding may take: a slow endpoint gives a lexical answer, not
	// a failed request.
	cl := indexer.Client{NC: nc, Timeout: evalEmbedTimeout + 10*time.Second}
	ready := false
	for range 6000 {
		if cat.Seq() >= last && cat.Ready() {
			if _, err := cl.Servers(ctx, policy.Local.Tenant, subjects.ServersRequest{V: subjects.Version}); err == nil {
				ready = true
				break
			}
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case err := <-errc:
			return out, fmt.Errorf("indexer: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !ready {
		return out, errors.New("eval: the indexer replica did not catch up within 60s")
	}
	if emb != nil {
		// Every tool's vector first (bounded: 10 min), or the figures would mix modes.
		for i := 0; ; i++ {
			st := cat.Stats()
			if st.VectorsPending == 0 && st.Vectors > 0 {
				break
			}
			if i == 60000 {
				return out, fmt.Errorf("eval: tool embeddings not done after 10 minutes (%d pending, %d embedder errors)", st.VectorsPending, st.EmbedErrors)
			}
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	public := map[string]string{} // catalog id → public name
	for _, t := range tools {
		public[evalToolID(t)] = subjects.PublicName(t.Server, t.Name)
	}
	lexical := 0 // queries answered without their vector (with emb)
	for _, q := range queries {
		var gold [][]string
		for _, g := range evalGroups(q) {
			var pg []string
			for _, id := range g {
				n, ok := public[id]
				if !ok {
					return out, fmt.Errorf(`query %s: gold tool %q is not in the catalog (no tool is that "server::name")`, termClip(q.ID, 128), termClip(id, 128))
				}
				pg = append(pg, n)
			}
			gold = append(gold, pg)
		}
		rep, err := cl.Search(ctx, policy.Local.Tenant, subjects.SearchRequest{V: subjects.Version, Query: q.Query, K: k, Detail: subjects.DetailName})
		if err != nil {
			return out, fmt.Errorf("query %s: %w", termClip(q.ID, 128), err)
		}
		var names []string
		if emb != nil && rep.Error == nil && rep.Ranking != subjects.RankingHybrid {
			lexical++
		}
		if rep.Error != nil {
			// A query the service refuses (empty, too long) counts as no results.
			fmt.Fprintf(warn, "mcpstream eval: query %s: %s: %s\n", termClip(q.ID, 128), termLine(rep.Error.Code), termLine(rep.Error.Message))
		}
		for _, t := range rep.Tools {
			names = append(names, t.Name)
		}
		out.results = append(out.results, names)
		out.gold = append(out.gold, gold)
	}
	if lexical > 0 {
		fmt.Fprintf(warn, "mcpstream eval: %d of %d queries were ranked lexically, not hybrid (their embedding failed or timed out, or followed a failure within the replica's hold-off): the figures mix the two modes\n",
			lexical, len(queries))
	}
	out.metrics = search.Evaluate(out.results, out.gold)
	return out, nil
}

// evalSnapshot is the tools snapshot of one server of the evaluation catalog.
func evalSnapshot(server string, tools []evalTool) subjects.Snapshot {
	sn := subjects.Snapshot{
		V: subjects.Version, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools,
		ListedAt: time.Now().UTC(), Pages: 1, Items: []json.RawMessage{},
	}
	for _, t := range tools {
		if t.ServerDescription != "" && sn.Info == nil {
			sn.Info = &subjects.ServerInfo{Description: t.ServerDescription}
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		item, _ := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}{t.Name, t.Description, schema})
		sn.Items = append(sn.Items, item)
	}
	return sn
}

// readJSONLines reads one JSON value per non-empty line, each checked by check (given its
// 1-based line number); errors name the file and the line.
func readJSONLines[T any](path string, check func(T, int) error) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxEvalLine)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := check(v, line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line too long (over %d MiB)", path, line+1, maxEvalLine>>20)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// maxEvalLine is the longest line of an eval input file.
const maxEvalLine = 16 << 20

// evalToolID is a catalog tool's id, "server::name".
func evalToolID(t evalTool) string { return t.Server + "::" + t.Name }

// evalGroups is a query's gold groups: gold_groups, or else each of gold_tools its own group.
func evalGroups(q evalQuery) [][]string {
	if len(q.GoldGroups) > 0 {
		return q.GoldGroups
	}
	var groups [][]string
	for _, id := range q.GoldTools {
		groups = append(groups, []string{id})
	}
	return groups
}
