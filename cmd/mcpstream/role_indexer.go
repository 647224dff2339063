package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/liveness"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	registerRole(role{name: "indexer", order: 20, start: startIndexer, prepare: prepareIndexer})
	register(indexerCommand())
}

// defaultIndexerMemoryLimit is the soft memory limit `mcpstream indexer` sets when neither
// --memory-limit nor GOMEMLIMIT is given: a replica of 100k tools holds about 180 MB of live heap
// and, with this limit, stays under 300 MB of RSS (Go's default GC lets the heap grow to twice
// what it holds: about 420 MB).
const defaultIndexerMemoryLimit = "200MiB"

// indexerCommand is roleCommand("indexer", ...) plus --memory-limit, which only a process that
// runs the indexer role alone takes (under `up` the roles share the process and its GOMEMLIMIT).
func indexerCommand() command {
	const name = "indexer"
	return command{
		name:    name,
		summary: "run a catalog replica (Badger catalog + search service) against NATS",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			o := hostOptions{Name: name}
			fs := newFlagSet(name, name+" [flags]", indexerHelp)
			o.register(fs, false)
			limit := fs.String("memory-limit", defaultIndexerMemoryLimit,
				"soft memory limit of the Go runtime (runtime/debug.SetMemoryLimit), e.g. 200MiB, 1GiB, or \"off\"; ignored when GOMEMLIMIT is set")
			rest, err := parseFlags(fs, args, stdout, stderr)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return usageErrorf("%s: unexpected argument %q", name, rest[0])
			}
			n, err := parseMemoryLimit(*limit)
			if err != nil {
				return usageErrorf("--memory-limit: %w", err)
			}
			if _, set := os.LookupEnv("GOMEMLIMIT"); !set && n > 0 {
				// For as long as the command runs (it may run inside a test process).
				defer debug.SetMemoryLimit(debug.SetMemoryLimit(n))
			}
			return runRoles(ctx, o, []string{name}, stdout, stderr)
		},
	}
}

// parseMemoryLimit parses a byte count with an optional unit (see parseSize); "off", "0" or ""
// mean no limit (0).
func parseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "off" || s == "0" {
		return 0, nil
	}
	b, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a size such as 200MiB, 1GiB or off", s)
	}
	if b < 16<<20 {
		return 0, fmt.Errorf("%q: want at least 16MiB (or off)", s)
	}
	return b, nil
}

// parseSize parses a byte count with an optional unit: B, KiB, MiB, GiB, TiB (as GOMEMLIMIT
// accepts) or KB, MB, GB, TB (powers of 1000).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	mult := map[string]float64{"": 1, "B": 1,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || v < 0 || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q: want a size such as 512MiB or 10GiB", s)
	}
	return int64(v * mult), nil
}

const indexerHelp = `
Runs one catalog replica. It consumes the registry stream (MCPSTREAM_REGISTRY) with an ordered
consumer, keeps a Badger catalog in DATA/indexer/REPLICA (the last applied stream sequence is
stored in the same transaction as the data), and serves the catalog service in queue group
"` + indexer.QueueGroup + `", so any number of replicas share the load:

  mcpstream.v1.catalog.<tenant>.search    search_tools: ranked, permission-filtered search
  mcpstream.v1.catalog.<tenant>.details   get_tool_details: full definitions by public name
  mcpstream.v1.catalog.<tenant>.servers   servers with the counts the principal may see

The tenant is the subject's token: a request's principal is resolved within it, so NATS
permissions pin each tenant to its own catalog.

A replica with an empty directory rebuilds the catalog by replaying the stream from its first
message, then follows it; a restarted replica resumes from its stored sequence. It joins the
queue group only once it has caught up, so a rebuilding replica never answers. Several replicas
may run side by side: give each its own --replica (or its own --data); Badger locks a directory
to one process. --config is read for its policy section (the same policy the executor
enforces; without one, the local principal may use everything) and its search section; the
servers' ${ENV_VAR} secrets need not be set in the indexer's environment. The replica advertises
the digest of its policy on $SRV.INFO.` + subjects.CatalogService + ` (once it serves), logs it and serves it
on /metrics (mcpstream_policy_info), and compares it with every other replica's and executor's
at start and every 30 s (a warning and mcpstream_policy_mismatch 1 when one differs; see
mcpstream policy check).

Every replica also watches the registrysync processes' heartbeats (mcpstream.v1.heartbeat.*): a
server whose registrysync has been silent for 3 heartbeat periods (15 s by default: killed, or
cut off from NATS) is published unavailable with the code connector_lost, and leaves search,
until its registrysync runs again. The first replica to notice stores it; the others are
refused by the stream.

Memory: a replica keeps the search index and a summary of each tool in memory (schemas stay in
Badger): about 1.6 KB of live heap per tool. Go's default GC lets the heap grow to twice what
it holds, so this command sets a soft memory limit (runtime/debug.SetMemoryLimit) of
--memory-limit, ` + defaultIndexerMemoryLimit + ` by default, which keeps a replica of 100k tools under 300 MB
of RSS. It is soft: a replica that holds more than the limit keeps working, with the GC using
more CPU (at most about half of it). For much larger catalogs raise it (about 2 KB per tool
plus 30 MB); --memory-limit off restores Go's default GC, and GOMEMLIMIT, when set, wins over
the flag. Under ` + "`mcpstream up`" + ` the roles share one process and no limit is set (use GOMEMLIMIT).

Examples:
  mcpstream indexer --nats nats://127.0.0.1:4222 --data /var/lib/mcpstream --replica 1
  mcpstream indexer --nats nats://nats-1:4222,nats://nats-2:4222 --config mcpstream.yaml --replica 2
  rm -rf /var/lib/mcpstream/indexer/1 && mcpstream indexer --data /var/lib/mcpstream --replica 1   # rebuild by replay`

// indexerReplica is the replica name of env (--replica, "0" by default) and the instance name
// it advertises.
func indexerReplica(env *roleEnv) (replica, instance string) {
	replica = env.Replica
	if replica == "" {
		replica = "0"
	}
	host, _ := os.Hostname()
	return replica, fmt.Sprintf("%s:%d/%s", host, os.Getpid(), replica)
}

// checkReplica refuses a --replica that is not a plain name (a directory under DATA/indexer).
func checkReplica(replica string) error {
	if filepath.Base(replica) != replica || replica == "." || replica == ".." {
		return usageErrorf("--replica %q: want a plain name such as 0, 1, east-2", replica)
	}
	return nil
}

// prepareIndexer opens the replica's catalog under DATA/indexer/REPLICA before the process
// connects to NATS (env.catalog): a directory another process holds (Badger locks it), or one
// that cannot be read, is reported at once, whether NATS is up or not.
func prepareIndexer(env *roleEnv) (release func(), err error) {
	cat, err := openIndexerCatalog(env, env.Log.With().Str("role", "indexer").Logger())
	if err != nil {
		return nil, err
	}
	env.catalog = cat
	return func() { cat.Close() }, nil
}

// openIndexerCatalog opens the replica's catalog under DATA/indexer/REPLICA.
func openIndexerCatalog(env *roleEnv, log zerolog.Logger) (*indexer.Catalog, error) {
	replica, instance := indexerReplica(env)
	if err := checkReplica(replica); err != nil {
		return nil, err
	}
	dir := filepath.Join(env.DataDir, "indexer", replica)
	if err := mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("indexer data: %w", err)
	}
	icfg := indexer.Config{Dir: dir, Policy: env.Policy, Log: log, Replica: replica, Instance: instance}
	if e := env.Config.embedder; e != nil {
		icfg.Embedder, icfg.EmbedTimeout = e, env.Config.embedTimeout
		log.Info().Str("embedder", e.Name()).Msg("hybrid search: tool and request embeddings")
	}
	cat, err := indexer.Open(icfg)
	if err != nil {
		if errors.Is(err, indexer.ErrInUse) {
			return nil, fmt.Errorf("open catalog %s: %w (is another indexer using this --data and --replica?)", dir, err)
		}
		// Unreadable (indexer.ErrUnreadable: the error says to remove the directory), or
		// Badger failed: no lock conflict to hint at.
		return nil, fmt.Errorf("open catalog %s: %w", dir, err)
	}
	log.Info().Str("dir", dir).Uint64("seq", cat.Seq()).Int("tools", cat.Stats().Tools).
		Str("instance", instance).Str("policy", env.Policy.Digest()).Msg("catalog opened")
	return cat, nil
}

// startIndexer takes the catalog prepareIndexer opened (or opens it); Run follows the registry
// stream and serves the catalog service until the role stops, then closes the catalog.
func startIndexer(ctx context.Context, env *roleEnv) (roleRun, error) {
	replica, instance := indexerReplica(env)
	cat := env.catalog
	if cat == nil {
		var err error
		if cat, err = openIndexerCatalog(env, env.Log); err != nil {
			return roleRun{}, err
		}
	}
	run := func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 3)
		go func() { errc <- cat.Follow(ctx, env.JS) }()
		go func() { errc <- cat.Serve(ctx, env.NC) }()
		// Every replica watches the connectors' heartbeats: a silent one's servers are declared
		// unavailable (connector_lost) and leave search (package liveness).
		wd := &liveness.Watchdog{NC: env.NC, JS: env.JS, Log: env.Log.With().Str("component", "liveness").Logger()}
		go func() { errc <- wd.Run(ctx) }()
		var err error
		for range 3 {
			if e := <-errc; e != nil {
				err = errors.Join(err, e)
				cancel() // one half failed: stop the other before closing the store
			}
		}
		return errors.Join(err, cat.Close())
	}
	env.addMetrics(catalogMetrics(cat, replica))
	// The replica advertises its policy digest on $SRV.INFO.mcpstream-catalog (once it serves)
	// and compares it with the other replicas' and the executors'.
	watch := newPolicyWatch(env, subjects.RoleIndexer, instance, "")
	return roleRun{Run: withPolicyWatch(watch, run), Ready: cat.Ready}, nil
}
