package main

import (
	"context"

	"github.com/mcpstream/mcpstream/registrysync"
)

func init() {
	registerRole(role{name: "registrysync", order: 10, start: startRegistrySync})
	register(roleCommand("registrysync", "run the MCP server connectors against a NATS server or cluster", registrySyncHelp))
}

const registrySyncHelp = `
Runs the connectors: one session per configured MCP server (stdio, streamable HTTP or SSE). Each
connector lists tools, prompts and resources (every page), follows list_changed notifications,
reconnects with backoff, and publishes to the registry stream:

  mcpstream.v1.registry.<server>.snapshot.<kind>   whole list of one kind
  mcpstream.v1.registry.<server>.changed.<kind>    list_changed received
  mcpstream.v1.registry.<server>.confirmed.<kind>  re-listed unchanged: its ttlMs restarts
                                                   (lists with a ttlMs; at most once per half TTL)
  mcpstream.v1.registry.<server>.status            connecting | ready | unavailable | removed

It also answers mcpstream.v1.control.relist.<server> (re-list now) and
mcpstream.v1.dispatch.<server> (tools/call on the session it holds, for the executor).
Credentials from the configuration (env, headers, ${ENV_VAR} references) stay in this process.

Run exactly one registrysync process per set of servers: it owns their sessions.

Ctrl-C or SIGTERM stops it cleanly: calls in flight finish (within --stop-timeout), then each
stdio child's stdin is closed, SIGTERM and SIGKILL go to its process group after 2 s and 3 s
more; past --stop-timeout every stdio child's process group is sent SIGKILL and the exit status
is 1. A second Ctrl-C or SIGTERM while stopping quits at once (exit status 130), after sending
SIGKILL to every stdio child's process group.

Examples:
  mcpstream registrysync --nats nats://127.0.0.1:4222 --config mcpstream.yaml
  MCPSTREAM_NATS=nats://nats-1:4222,nats://nats-2:4222 mcpstream registrysync --config /etc/mcpstream/mcpstream.yaml`

// startRegistrySync creates the connectors' manager and makes it the process's Registry, so that
// roles started after it (the executor under up) reach sessions in-process.
func startRegistrySync(ctx context.Context, env *roleEnv) (roleRun, error) {
	servers := env.Config.ServerConfigs()
	if len(servers) == 0 {
		env.Log.Warn().Msg("no MCP servers configured")
	}
	// tools/call requests in flight when the process stops finish within --stop-timeout before
	// the sessions close (not a fixed 10 s).
	mgr := registrysync.New(env.JS, env.NC, registrysync.Config{Servers: servers, DrainTimeout: inFlightGrace(env.StopTimeout)}, env.Log)
	env.Registry = mgr
	env.addMetrics(registryMetrics(mgr))
	// Ready once its endpoints are up and every server's first connection attempt concluded
	// (ready or unavailable).
	// A forced exit (a second Ctrl-C or SIGTERM while stopping) kills the stdio children: each
	// runs in its own process group, which the terminal's Ctrl-C does not reach, and one that
	// does not exit when its stdin closes would outlive the process.
	run := func(ctx context.Context) error {
		defer onForcedExit(mgr.KillChildren)()
		return mgr.Run(ctx)
	}
	return roleRun{Run: run, Ready: mgr.Ready}, nil
}
