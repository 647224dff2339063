// Command mcpstream is the one binary of mcpstream: `mcpstream up` runs every role on an embedded
// NATS server; the other subcommands run one role against a NATS server or cluster, or are
// clients of the NATS API (search, call, events, servers...). `mcpstream help` lists them.
//
// # Layout
//
// main.go holds run(ctx, args, stdout, stderr) and the command table; every subcommand registers
// itself from its own file with register, every role with registerRole (roles.go). up.go runs a
// set of roles in one process (runRoles): `up` runs them all, roleCommand builds the subcommand
// of one role. config.go loads and validates the YAML configuration; clientflags.go holds the
// flags every client shares (--nats, --nats-creds, --nats-inbox, --principal, --roles, --json).
//
// # Exit status
//
// main exits with exitStatus(err): 0, the status of an exitCode (the command printed why), 2 for
// a usage error, else 1. A usage error — a missing, extra or unknown argument, a flag's value
// out of its range — is found before anything is connected to or created: either printed with
// the usage (usageError) and returned as exitCode(2), or returned as a badUsage (usageErrorf),
// which main prints. runRoles checks its flags (--nats and --nats-inbox too: usage errors of a
// role command, where a client command reports them as it connects), the configuration and
// the ports before it creates --data, and runs each role's prepare (the indexer opens its
// catalog) before it connects to NATS.
//
// # Subjects
//
// The binary itself adds no subjects: roles consume and produce what their packages document
// (registrysync, indexer, executor). Indexer and executor roles also ask $SRV.INFO of the catalog
// and executor services at start and every 30 s, comparing the policy digests the instances
// advertise with their own, and executors their enforcement digests (limits, approval patterns,
// timeouts: executor.Config.EnforcementDigest) with the other executors' (policycheck.go;
// `mcpstream policy check` does the same once). Every process that runs roles declares the streams
// (subjects.Streams) at start, idempotently, keeping an existing stream's replica count unless
// --stream-replicas is given, and its limits (max age, bytes, messages) unless the
// configuration's streams section gives them. `events` and `servers` read the registry, results and audit
// streams with ordered consumers (ephemeral, in memory, no acks): reading never changes what
// other consumers see.
//
// # Terminal output
//
// Text from servers, NATS messages and input files reaches the terminal only through termLine,
// termClip, termBlock (search.go) or oneLine (events.go), which drop every control and format
// character (termUnsafe); JSON output only through termSafeJSON (events.go; printJSON and every
// other --json writer), which escapes those JSON lets through raw (DEL, C1, bidi) and invalid UTF-8.
//
// # State
//
// Under --data (default ./.mcpstream): LOCK (held by `up`, with or without --nats, against a
// second `up`), nats/ (the embedded JetStream store, `up` without --nats only), demo/ (the demo
// servers' control files), and whatever roles keep there (indexer catalogs). Configuration secrets are resolved in memory
// and handed only to registrysync (which sends them to the servers) and the executor (which
// redacts their values from audit events).
//
// # HTTP
//
// With --http-listen: GET /healthz answers 200 once every role of the process is ready, 503
// before (from the moment the listener is open: while NATS starts and the streams are declared
// too) and while stopping; GET /metrics serves Prometheus metrics (metrics.go: each role's
// counters read from its Stats at scrape time, and the slow consumers of the process's NATS
// connection, which natsconn.go also logs, rate-limited). Roles may add routes (roleEnv.HTTP).
package main
