package main

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/registrysync"
)

// roleEnv is what every role gets, from `up` (all roles in one process) or from the role's own
// subcommand (one role against a NATS server or cluster).
type roleEnv struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Config  *fileConfig // never nil: without --config it holds the bundled demo servers
	Policy  *policy.Policy
	Log     zerolog.Logger
	DataDir string // this process's state directory (Badger catalogs live below it)
	// Registry is the in-process registrysync manager when that role runs in this process
	// (always under `up`), else nil: other roles then reach connectors over NATS.
	Registry *registrysync.Manager
	// StreamWriteError reports a stream's store write error (a full disk) when the process
	// embeds the NATS server (natsembed.Server.StreamWriteError), else nil.
	StreamWriteError func(stream string) error
	// Replica distinguishes several replicas of a role in one data directory ("" = "0").
	Replica string
	// HTTP is the process's HTTP mux (routes such as /mcp are added during start), nil when the
	// process serves no HTTP. /healthz and /metrics are taken.
	HTTP *http.ServeMux
	// Metrics is the registry GET /metrics serves (nil without HTTP): roles add their counters
	// with addMetrics.
	Metrics *prometheus.Registry
	// StopTimeout is --stop-timeout: how long the roles may take to stop. Roles that let work
	// in flight finish when stopping (the executor's calls, the connectors' tools/call
	// requests) wait for it up to inFlightGrace(StopTimeout), not a fixed time of their own.
	StopTimeout time.Duration
	// catalog is the indexer's catalog, opened by its prepare before the process connected to
	// NATS (nil: startIndexer opens it).
	catalog *indexer.Catalog
	// policyLog is shared by the policy checks of the roles run with this environment: a
	// mismatch they all see is logged once (see lastLogged).
	policyLog *lastLogged
}

// inFlightGrace is how long a stopping role waits for the work it has in flight, within a stop
// timeout: all of it but a margin (5 s, less for short timeouts) for what follows (the audit
// events flushed, the connection drained). Zero for a zero timeout (the role's own default).
func inFlightGrace(stopTimeout time.Duration) time.Duration {
	if stopTimeout <= 0 {
		return 0
	}
	return stopTimeout - min(5*time.Second, stopTimeout/3)
}

// roleRun is a started role.
type roleRun struct {
	Run   func(ctx context.Context) error // blocks until ctx is done; returns nil on a clean stop
	Ready func() bool                     // true once the role serves (for /healthz)
}

// role is one part of the system; each registers itself from its own file.
type role struct {
	name  string
	order int // start order under `up`: lower first
	start func(ctx context.Context, env *roleEnv) (roleRun, error)
	// prepare, when set, runs before the process connects to NATS (the data directory exists,
	// env has no NC or JS yet): what can fail without NATS, such as a catalog directory another
	// process holds, fails at once rather than once NATS is reached. It may set fields of env
	// that start uses; release undoes it when start is not reached or fails (a started role
	// owns what was prepared).
	prepare func(env *roleEnv) (release func(), err error)
}

var roles []role

func registerRole(r role) {
	roles = append(roles, r)
	sort.SliceStable(roles, func(i, j int) bool { return roles[i].order < roles[j].order })
}

func findRole(name string) (role, bool) {
	for _, r := range roles {
		if r.name == name {
			return r, true
		}
	}
	return role{}, false
}
