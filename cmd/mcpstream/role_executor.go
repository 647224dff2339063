package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	registerRole(role{name: "executor", order: 30, start: startExecutor})
	register(command{
		name:    "executor",
		summary: "run executor workers (the host broker) against a NATS server or cluster",
		run:     runExecutorCommand,
	})
}

const executorHelp = `
Runs the host broker: a front end that answers call requests and --workers workers that execute
them. Any number of executor processes share the work: the front ends form the queue group
"` + subjects.ExecutorQueue + `" and the workers one durable consumer of the calls stream.

  ` + subjects.Root + `.exec.<tenant>           request/reply: CallRequest → CallResult (the worker that
                                       runs the call answers the caller's _INBOX. directly)
  ` + subjects.Root + `.calls.<tenant>          the durable work queue (Nats-Msg-Id: call:<tenant>:<id>)
  ` + subjects.Root + `.results.<tenant>.<id>   the one terminal answer of each call
  ` + subjects.Root + `.audit.<tenant>.<event>  request, decision, dispatch, result (redacted)
  ` + subjects.Root + `.approvals.<tenant>.<id> approve or deny a call waiting in needs_approval

Each call is checked in order: the principal is known (unknown_principal), the tool exists
(not_found), the principal may call it (forbidden), it is fresh (stale, unavailable; an expired
ttlMs is re-listed first, then the policy is asked again), the arguments match the tool's real inputSchema (invalid_arguments with the JSON pointer of the
failure), a human approved it if it is destructive or the policy says so (denied,
approval_timeout), the limits allow it (rate_limited with retryAfterMs); then tools/call runs
with a timeout (timeout, result_too_large), and a result that is not isError is checked against
the tool's outputSchema (protocol_error: the tool ran, its result is withheld; a schema that
cannot be used lets results pass, and the audit says so). A tool that is neither read-only nor idempotent is
claimed before dispatch: if an executor dies mid-call, the answer is outcome_unknown, never a
second execution.

The executor replays the registry stream at start, then reaches the connectors over NATS
(` + subjects.Root + `.dispatch.<server>): run registrysync somewhere. --config gives the policy, the
limits section (rate limits and concurrency caps shared by every executor) and the secret values
to redact from audit events.

Every executor, --no-front-end included, answers $SRV.INFO.` + subjects.ExecutorService + ` (discovery
only) with the digest of the policy it enforces, logs it at start, serves it on /metrics
(mcpstream_policy_info) and compares it with every catalog replica's and executor's at start and
every 30 s: a warning and mcpstream_policy_mismatch 1 when one differs. It does the same with an
enforcement digest of its limits section, approval patterns and timeouts, compared with the
other executors' only (mcpstream_executor_enforcement_info, _mismatch). See mcpstream policy check.

Examples:
  mcpstream executor --nats nats://127.0.0.1:4222 --config mcpstream.yaml
  mcpstream executor --nats nats://nats-1:4222,nats://nats-2:4222 --config /etc/mcpstream/mcpstream.yaml --workers 128`

// executorOptions are the executor subcommand's own flags (defaults under up).
var executorOptions struct {
	Workers          int
	MaxApprovalWaits int
	NoFront          bool
}

func runExecutorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := hostOptions{Name: "executor"}
	fs := newFlagSet("executor", "executor [flags]", executorHelp)
	o.register(fs, false)
	fs.IntVar(&executorOptions.Workers, "workers", executor.DefaultWorkers, "calls this process handles at once: 1 to "+strconv.Itoa(executor.MaxWorkers)+", the pull requests the calls consumer takes over every executor")
	fs.IntVar(&executorOptions.MaxApprovalWaits, "max-approval-waits", 0, "calls waiting for approval at once; each holds a worker, and one past this is refused\nrate_limited (0 = half of --workers)")
	fs.BoolVar(&executorOptions.NoFront, "no-front-end", false, "do not serve "+subjects.ExecAll+" (workers only)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("executor: unexpected argument %q", rest[0])
	}
	if executorOptions.Workers < 1 || executorOptions.Workers > executor.MaxWorkers {
		// Each worker keeps a pull request waiting on the calls consumer, which takes
		// executor.MaxWorkers over every executor: the server would refuse the pulls past it.
		return usageErrorf("executor: --workers %d: want 1 to %d (the pull requests the calls consumer takes over every executor)", executorOptions.Workers, executor.MaxWorkers)
	}
	if executorOptions.MaxApprovalWaits < 0 || executorOptions.MaxApprovalWaits > executorOptions.Workers {
		return usageErrorf("executor: --max-approval-waits %d: want 0 (half of --workers) up to --workers (%d)", executorOptions.MaxApprovalWaits, executorOptions.Workers)
	}
	return runRoles(ctx, o, []string{"executor"}, stdout, stderr)
}

// startExecutor builds the executor of this process: in-process connectors when registrysync
// runs here (up), NATS otherwise.
func startExecutor(ctx context.Context, env *roleEnv) (roleRun, error) {
	cfg, err := executorEnforcement(env.Config)
	if err != nil {
		return roleRun{}, err
	}
	cfg.Policy = env.Policy
	cfg.Workers = executorOptions.Workers
	cfg.MaxApprovalWaits = executorOptions.MaxApprovalWaits
	cfg.Log = env.Log
	cfg.StreamWriteError = env.StreamWriteError
	// Calls in flight when the process stops finish within --stop-timeout (not a fixed 10 s: a
	// call cut there is answered only after AckWait, outcome_unknown if it has side effects,
	// though it ran).
	cfg.StopGrace = inFlightGrace(env.StopTimeout)
	if executorOptions.NoFront {
		cfg.FrontEnd = new(bool)
	}
	if env.Registry != nil {
		// The in-process connectors for this process's servers; over NATS for the servers
		// another registrysync process serves (they are in the registry stream all the same).
		lf := localFirst{local: env.Registry, remoteD: executor.NATSDispatcher{NC: env.NC}, remoteR: executor.NATSRelister{NC: env.NC}}
		cfg.Dispatcher, cfg.Relister = lf, lf
	}
	for _, sc := range env.Config.ServerConfigs() {
		cfg.Secrets = append(cfg.Secrets, sc.Secrets...)
	}
	servers := make([]string, 0, len(env.Config.Servers))
	for _, s := range env.Config.Servers {
		servers = append(servers, s.Name)
	}
	if unknown := env.Config.Limits.unknownServers(servers); len(unknown) > 0 {
		env.Log.Warn().Strs("limits", unknown).Strs("servers", servers).
			Msg("limits that name no server of this configuration: kept (a server of that name may register later), but check them for typos")
	}
	cfg.Secrets = append(cfg.Secrets, env.Config.embedSecrets...) // every configured secret
	host, _ := os.Hostname()
	cfg.Name = fmt.Sprintf("%s:%d", host, os.Getpid())
	if env.Replica != "" {
		cfg.Name += "/" + env.Replica
	}
	ex, err := executor.New(env.NC, cfg)
	if err != nil {
		return roleRun{}, err
	}
	env.addMetrics(executorMetrics(ex))
	enforcement := cfg.EnforcementDigest()
	env.Log.Info().Str("instance", cfg.Name).Str("policy", env.Policy.Digest()).Str("enforcement", enforcement).
		Bool("frontEnd", !executorOptions.NoFront).Msg("executor starting")
	// Every executor (--no-front-end included) advertises its policy and enforcement digests
	// on $SRV.INFO.mcpstream-executor and compares them with the others'.
	watch := newPolicyWatch(env, subjects.RoleExecutor, cfg.Name, enforcement)
	return roleRun{Run: withPolicyWatch(watch, ex.Run), Ready: ex.Ready}, nil
}

// executorEnforcement is the part of an executor's configuration that the configuration file
// decides and its enforcement digest covers (executor.Config.EnforcementDigest): the limits
// section. Every other setting that digest covers is left at its default by the executor role,
// so that `mcpstream policy digest` and `policy check --config` compute what executors started
// with the file advertise.
func executorEnforcement(fc *fileConfig) (executor.Config, error) {
	limits, err := fc.Limits.executorLimits()
	if err != nil {
		return executor.Config{}, fmt.Errorf("%s: %w", configName(fc), err)
	}
	return executor.Config{Limits: limits}, nil
}

func configName(c *fileConfig) string {
	if c == nil || c.Path == "" {
		return "configuration"
	}
	return c.Path
}

// localFirst dispatches and re-lists through the in-process registrysync manager for the
// servers it serves, and over NATS for every other server.
type localFirst struct {
	local   *registrysync.Manager
	remoteD executor.NATSDispatcher
	remoteR executor.NATSRelister
}

func (l localFirst) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	if l.local.Serves(server) {
		return l.local.Dispatch(ctx, server, req)
	}
	return l.remoteD.Dispatch(ctx, server, req)
}

func (l localFirst) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	if l.local.Serves(server) {
		return l.local.Relist(ctx, server, req)
	}
	return l.remoteR.Relist(ctx, server, req)
}
