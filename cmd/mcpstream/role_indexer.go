package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	registerRole(role{name: "indexer", order: 20, start: startIndexer})
	register(roleCommand("indexer", "run a catalog replica (Badger catalog + search service) against NATS", indexerHelp))
}

const indexerHelp = `
Runs one catalog replica. It consumes the registry stream (MCPSTREAM_REGISTRY) with an ordered
consumer, keeps a Badger catalog in DATA/indexer/REPLICA (the last applied stream sequence is
stored in the same transaction as the data), and serves the catalog service in queue group
"` + indexer.QueueGroup + `", so any number of replicas share the load:

  ` + subjects.CatalogSearch + `    search_tools: ranked, permission-filtered search
  ` + subjects.CatalogDetails + `   get_tool_details: full definitions by public name
  ` + subjects.CatalogServers + `   servers with the counts the principal may see

A replica with an empty directory rebuilds the catalog by replaying the stream from its first
message, then follows it; a restarted replica resumes from its stored sequence. It joins the
queue group only once it has caught up, so a rebuilding replica never answers. Several replicas
may run side by side: give each its own --replica (or its own --data); Badger locks a directory
to one process. --config is read only for its policy section (the same policy the executor
enforces): without one, the local principal may use everything.

Memory: a replica keeps the search index and a summary of each tool in memory (schemas stay in
Badger). For 100k tools, run it with GOMEMLIMIT=200MiB to keep it under 300 MB of RSS (the
default GC lets the heap grow to twice what it holds).

Examples:
  mcpstream indexer --nats nats://127.0.0.1:4222 --data /var/lib/mcpstream --replica 1
  mcpstream indexer --nats nats://nats-1:4222,nats://nats-2:4222 --config mcpstream.yaml --replica 2
  rm -rf /var/lib/mcpstream/indexer/1 && mcpstream indexer --replica 1   # rebuild by replay`

// startIndexer opens the replica's catalog under DATA/indexer/REPLICA; Run follows the registry
// stream and serves the catalog service until the role stops.
func startIndexer(ctx context.Context, env *roleEnv) (roleRun, error) {
	replica := env.Replica
	if replica == "" {
		replica = "0"
	}
	if filepath.Base(replica) != replica || replica == "." || replica == ".." {
		return roleRun{}, fmt.Errorf("--replica %q: want a plain name such as 0, 1, east-2", replica)
	}
	dir := filepath.Join(env.DataDir, "indexer", replica)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return roleRun{}, fmt.Errorf("indexer data: %w", err)
	}
	cat, err := indexer.Open(indexer.Config{Dir: dir, Policy: env.Policy, Log: env.Log, Replica: replica})
	if err != nil {
		return roleRun{}, fmt.Errorf("open catalog %s: %w (is another indexer using this --data and --replica?)", dir, err)
	}
	env.Log.Info().Str("dir", dir).Uint64("seq", cat.Seq()).Int("tools", cat.Stats().Tools).Msg("catalog opened")
	run := func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 2)
		go func() { errc <- cat.Follow(ctx, env.JS) }()
		go func() { errc <- cat.Serve(ctx, env.NC) }()
		var err error
		for range 2 {
			if e := <-errc; e != nil {
				err = errors.Join(err, e)
				cancel() // one half failed: stop the other before closing the store
			}
		}
		return errors.Join(err, cat.Close())
	}
	return roleRun{Run: run, Ready: cat.Ready}, nil
}
