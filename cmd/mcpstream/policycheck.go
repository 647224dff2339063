package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Policy consistency: catalog replicas (search) and executors must enforce the same policy, read
// from each process's own --config. Each advertises the digest of its policy (policy.Digest) in
// its start log, in /metrics and in the metadata of its micro service (subjects.PolicyInfo);
// `mcpstream policy check` and every such role ask $SRV.INFO of both services and compare.

func init() {
	register(command{
		name:    "policy",
		summary: "policy check: compare the policy digests of every catalog replica and executor; policy digest: the local one",
		run:     runPolicy,
	})
}

const policyHelp = `
Catalog replicas (search, details: what a principal may see) and executors (what a principal may
call) each enforce the policy of their own --config. When they run as separate processes and
one was given another configuration, search shows tools the executors refuse, or hides tools
that can be called. Each such process advertises a digest of its policy: a hash of the
normalized rules ("v1-" and 32 hex digits), the same however the file writes them (key order,
whitespace, list order) and different after any change of a rule, a principal or
approveDestructive. Without a policy section (one local principal may use everything) the digest
is the open policy's.

  mcpstream policy check [--config FILE]   ask every instance, compare (exit status 1 on mismatch)
  mcpstream policy digest [--config FILE]  print the digest of a configuration's policy

See mcpstream policy check --help.`

const policyCheckHelp = `
Asks every catalog replica ($SRV.INFO.` + subjects.CatalogService + `) and every executor
($SRV.INFO.` + subjects.ExecutorService + `) for the digest of the policy it enforces, collecting the
answers for --wait, and prints each instance's role, instance (host:pid and replica) and digest.
With --config, each is compared with that file's policy; without, with each other.

Exit status: 0 when every instance that answered enforces the same policy (the --config one when
given); 1 when any differs, with a message naming how many; 3 when no instance answered with a
digest (none runs, they run a version without digests, or the NATS user may not publish to
$SRV.INFO.* or read its inbox); 2 for bad flags.

Executors started with --no-front-end answer too (every executor runs the discovery service).
A replica still rebuilding its catalog does not answer until it serves. --json prints
{"expected","expectedFrom","consistent","instances":[{"role","instance","id","digest","match",
"problem"}],"digests":{DIGEST:COUNT},"majority","mismatched","unknown","truncated"}: match only
with --config; without it, "majority" is the digest most instances have (none on a tie) and
"mismatched" counts the others (every instance on a tie).

Examples:
  mcpstream policy check
  mcpstream policy check --config /etc/mcpstream/mcpstream.yaml --wait 2s --json`

const policyDigestHelp = `
Prints the digest of the policy of --config (the open policy's without --config, as the roles
run without one): compare it with what the roles advertise (their start log, /metrics
mcpstream_policy_info, mcpstream policy check). The configuration is checked as the roles check
it; the servers' ${ENV_VAR} secrets need not be set.

Examples:
  mcpstream policy digest --config mcpstream.yaml
  mcpstream policy digest --config mcpstream.yaml --json`

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runPolicyCheck(ctx, args[1:], stdout, stderr)
		case "digest":
			return runPolicyDigest(args[1:], stdout, stderr)
		}
	}
	fs := newFlagSet("policy", "policy check|digest [flags]", policyHelp)
	if _, err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	usageError(fs, stderr, "want a subcommand: check or digest", args)
	return exitCode(2)
}

// localPolicy loads the policy of a configuration file ("" = the open policy, as roles started
// without --config enforce), and names where it came from.
func localPolicy(path string) (*policy.Policy, string, error) {
	if path == "" {
		return policy.Open(), "no configuration (open policy)", nil
	}
	cfg, err := loadConfigFor(path, os.LookupEnv, false)
	if err != nil {
		return nil, "", err
	}
	p, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, "", fmt.Errorf("%s: policy: %w", path, err)
	}
	return p, path, nil
}

func runPolicyDigest(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy digest", "policy digest [flags]", policyDigestHelp)
	configPath := fs.String("config", "", "configuration file whose policy to digest (default: none, the open policy)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		usageError(fs, stderr, "unexpected argument", rest)
		return exitCode(2)
	}
	p, from, err := localPolicy(*configPath)
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"digest": p.Digest(), "from": from, "open": p.IsOpen()})
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s  %s\n", p.Digest(), from)
	return err
}

// policyInstance is one instance's answer to $SRV.INFO.
type policyInstance struct {
	Role     string `json:"role"`     // subjects.RoleIndexer or RoleExecutor (from the service name)
	Instance string `json:"instance"` // host:pid[/replica], as advertised
	ID       string `json:"id"`       // the micro service instance id
	Digest   string `json:"digest,omitempty"`
	// Match is whether Digest is the expected one (nil without one, or without a digest).
	Match *bool `json:"match,omitempty"`
	// Problem says why there is no digest: none advertised (an older mcpstream), or a
	// malformed one.
	Problem string `json:"problem,omitempty"`
}

// Bounds on what a check reads: $SRV answers come from any client allowed to subscribe there.
const (
	maxPolicyReplies    = 4096    // answers read per check
	maxPolicyReplyBytes = 1 << 16 // one answer (micro.Info with metadata is a few hundred bytes)
)

// policyServices are the micro services of the roles that enforce the policy.
var policyServices = map[string]string{subjects.CatalogService: subjects.RoleIndexer, subjects.ExecutorService: subjects.RoleExecutor}

// collectPolicyInstances asks $SRV.INFO of the catalog and executor services and reads the
// answers for wait (or until ctx ends, or maxPolicyReplies answers). It returns the instances
// sorted by role and instance, how many answers were not usable (not a service's info, too
// large, repeated) and whether it fell short: it stopped at maxPolicyReplies, or answers were
// dropped past the pending limits. Only a failure to ask is an error.
func collectPolicyInstances(ctx context.Context, nc *nats.Conn, wait time.Duration) (insts []policyInstance, bad int, truncated bool, err error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, false, fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer sub.Unsubscribe()
	// A flood of answers is dropped past these bounds (slow consumer) rather than held.
	sub.SetPendingLimits(maxPolicyReplies, maxPolicyReplies*maxPolicyReplyBytes/16)
	for _, svc := range []string{subjects.CatalogService, subjects.ExecutorService} {
		if err := nc.PublishRequest(subjects.SRVInfo(svc), inbox, nil); err != nil {
			return nil, 0, false, fmt.Errorf("publish %s: %w", subjects.SRVInfo(svc), err)
		}
	}
	if err := nc.Flush(); err != nil {
		return nil, 0, false, fmt.Errorf("flush: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if n == maxPolicyReplies {
			truncated = true
			break
		}
		msg, err := sub.NextMsgWithContext(rctx)
		if errors.Is(err, nats.ErrNoResponders) {
			continue // the server's 503 for a service nobody runs (no executor, say)
		}
		if errors.Is(err, nats.ErrSlowConsumer) {
			// More answers than the pending limits hold came (a flood): some were
			// dropped. Those queued are still read, and the report says it fell short.
			truncated = true
			continue
		}
		if err != nil {
			break // the wait is over (or ctx ended): what came is the answer
		}
		in, ok := parsePolicyInfo(msg.Data)
		if !ok || seen[in.Role+"\x00"+in.ID] {
			bad++
			continue
		}
		seen[in.Role+"\x00"+in.ID] = true
		insts = append(insts, in)
	}
	slices.SortFunc(insts, func(a, b policyInstance) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.ID, b.ID))
	})
	return insts, bad, truncated, nil
}

// parsePolicyInfo reads one $SRV.INFO answer of the catalog or executor service; false for
// anything else. Every string is made printable and bounded, and a digest that is not one
// (policy.DigestPattern) is not taken.
func parsePolicyInfo(data []byte) (policyInstance, bool) {
	if len(data) > maxPolicyReplyBytes {
		return policyInstance{}, false
	}
	var info struct {
		Type     string            `json:"type"`
		Name     string            `json:"name"`
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(data, &info) != nil || info.ID == "" {
		return policyInstance{}, false
	}
	role, ok := policyServices[info.Name]
	if !ok || info.Type != "" && info.Type != "io.nats.micro.v1.info_response" {
		return policyInstance{}, false
	}
	pi := subjects.PolicyInfoOf(info.Metadata)
	in := policyInstance{Role: role, ID: truncate(oneLine(info.ID), 64)}
	// An older catalog names only its replica.
	in.Instance = truncate(oneLine(cmp.Or(pi.Instance, info.Metadata["replica"])), 128)
	switch {
	case pi.PolicyDigest == "":
		in.Problem = "no policy digest advertised (mcpstream before policy digests?)"
	case !policy.DigestPattern.MatchString(pi.PolicyDigest):
		in.Problem = "malformed policy digest"
	default:
		in.Digest = pi.PolicyDigest
	}
	if pi.Role != "" && pi.Role != role {
		in.Problem = strings.TrimPrefix(in.Problem+"; ", "; ") + "advertises role " + truncate(oneLine(pi.Role), 32)
	}
	return in, true
}

// policyReport is the outcome of a check.
type policyReport struct {
	Expected     string           `json:"expected,omitempty"`     // the digest every instance should have
	ExpectedFrom string           `json:"expectedFrom,omitempty"` // where it came from (--config)
	Consistent   bool             `json:"consistent"`
	Instances    []policyInstance `json:"instances"`
	Digests      map[string]int   `json:"digests"` // instances per digest
	// Majority is, without Expected, the digest most instances have when several differ
	// (none on a tie).
	Majority   string `json:"majority,omitempty"`
	Mismatched int    `json:"mismatched"`
	Unknown    int    `json:"unknown"`             // instances without a usable digest
	Truncated  bool   `json:"truncated,omitempty"` // answers were left unread (a flood past the check's bounds)
}

// comparePolicies compares the instances' digests with expected ("" = with each other).
func comparePolicies(insts []policyInstance, expected string) policyReport {
	r := policyReport{Expected: expected, Instances: insts, Digests: map[string]int{}}
	if r.Instances == nil {
		r.Instances = []policyInstance{}
	}
	for i := range r.Instances {
		in := &r.Instances[i]
		if in.Digest == "" {
			r.Unknown++
			continue
		}
		r.Digests[in.Digest]++
		if expected != "" {
			m := in.Digest == expected
			in.Match = &m
			if !m {
				r.Mismatched++
			}
		}
	}
	if expected == "" && len(r.Digests) > 1 {
		// No reference: every instance outside the most common digest differs, and every
		// instance when several digests are the most common (nobody is the majority).
		most, tied := 0, 0
		for _, n := range r.Digests {
			switch {
			case n > most:
				most, tied = n, 1
			case n == most:
				tied++
			}
		}
		r.Mismatched = len(r.Instances) - r.Unknown
		if tied == 1 {
			r.Mismatched -= most
			for d, n := range r.Digests {
				if n == most {
					r.Majority = d
				}
			}
		}
	}
	r.Consistent = len(r.Digests) > 0 && r.Mismatched == 0
	return r
}

func runPolicyCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("policy check", "policy check [flags]", policyCheckHelp)
	cf.register(fs, false)
	configPath := fs.String("config", "", "configuration file whose policy every instance should enforce (default: compare the instances with each other)")
	wait := fs.Duration("wait", time.Second, "how long to collect answers (every instance answers at once; 1s is plenty on a LAN)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		usageError(fs, stderr, "unexpected argument", rest)
		return exitCode(2)
	}
	if *wait <= 0 || *wait > time.Minute {
		return fmt.Errorf("policy check: --wait %s: want more than 0, at most 1m", *wait)
	}
	expected, from := "", ""
	if *configPath != "" {
		p, src, err := localPolicy(*configPath)
		if err != nil {
			return err
		}
		expected, from = p.Digest(), src
	}
	wctx, denied, onDenied := cf.watchPermissions(ctx, subjects.SRVInfo(subjects.CatalogService), subjects.SRVInfo(subjects.ExecutorService))
	defer denied(nil)
	nc, _, err := cf.connect("policy check", onDenied)
	if err != nil {
		return err
	}
	defer nc.Close()
	insts, bad, truncated, err := collectPolicyInstances(wctx, nc, *wait)
	if err != nil {
		return err
	}
	if perr := cf.permissionsError(wctx, "policy check", "$SRV.INFO.*"); perr != nil {
		return perr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r := comparePolicies(insts, expected)
	r.ExpectedFrom, r.Truncated = from, truncated
	if bad > 0 {
		fmt.Fprintf(stderr, "mcpstream policy check: skipped %d answer(s) that are no catalog or executor service info\n", bad)
	}
	if err := writePolicyReport(stdout, r, cf.JSON); err != nil {
		return err
	}
	switch {
	case r.Mismatched > 0:
		if expected != "" {
			fmt.Fprintf(stderr, "mcpstream policy check: MISMATCH: %d of %d instance(s) enforce another policy than %s (%s); give them the same policy section and restart them\n",
				r.Mismatched, len(r.Instances)-r.Unknown, from, expected)
		} else {
			fmt.Fprintf(stderr, "mcpstream policy check: MISMATCH: the instances enforce %d different policies; give them the same policy section and restart them (--config FILE names the right one)\n",
				len(r.Digests))
		}
		return exitCode(1)
	case len(r.Digests) == 0:
		fmt.Fprintf(stderr, "mcpstream policy check: no catalog replica or executor answered with a policy digest within %s (none running, a version without digests, or the NATS user may not publish to $SRV.INFO.*)\n", *wait)
		return exitCode(3)
	}
	return nil
}

// writePolicyReport prints a check's report: JSON (one indented object) or a table and a summary.
func writePolicyReport(w io.Writer, r policyReport, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	return printPolicyReport(w, r)
}

func printPolicyReport(w io.Writer, r policyReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tINSTANCE\tDIGEST\tPOLICY")
	for _, in := range r.Instances {
		verdict := "-"
		switch {
		case in.Problem != "" && in.Digest == "":
			verdict = "unknown: " + in.Problem
		case in.Match != nil && *in.Match:
			verdict = "ok"
		case in.Match != nil:
			verdict = "MISMATCH"
		case len(r.Digests) == 1:
			verdict = "ok"
		case in.Digest == r.Majority:
			verdict = "majority"
		case len(r.Digests) > 1:
			verdict = "differs"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Role, dash(in.Instance), dash(in.Digest), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	roles := map[string]int{}
	for _, in := range r.Instances {
		roles[in.Role]++
	}
	fmt.Fprintf(w, "\n%d catalog replica(s), %d executor(s) answered", roles[subjects.RoleIndexer], roles[subjects.RoleExecutor])
	if r.Truncated {
		fmt.Fprintf(w, " (more answers came than a check reads, %d: some were not read)", maxPolicyReplies)
	}
	fmt.Fprintln(w)
	if r.Expected != "" {
		fmt.Fprintf(w, "expected %s (%s)\n", r.Expected, r.ExpectedFrom)
	}
	switch {
	case r.Mismatched > 0:
		fmt.Fprintf(w, "MISMATCH: %d instance(s) enforce another policy\n", r.Mismatched)
	case r.Consistent:
		fmt.Fprintln(w, "ok: every instance that answered enforces the same policy")
	}
	if r.Unknown > 0 {
		fmt.Fprintf(w, "%d instance(s) advertise no usable digest: not checked\n", r.Unknown)
	}
	return nil
}

// policyCheckEvery is how often a role compares its policy digest with every other instance's.
var policyCheckEvery = 30 * time.Second

// policyCheckWait is how long a role's check collects answers.
const policyCheckWait = time.Second

// policyWatch is a role's own policy check: at start and every policyCheckEvery it asks every
// catalog replica and executor for their digests and warns when one differs from its own.
type policyWatch struct {
	nc       *nats.Conn
	log      zerolog.Logger
	role     string // subjects.RoleIndexer or RoleExecutor
	instance string // this instance (left out of peers)
	digest   string

	peers      atomic.Int64 // other instances that answered the last check
	mismatched atomic.Int64 // of them, those with another digest
	last       string       // the mismatched instances last logged (run's goroutine only)
}

// run checks at once, then every policyCheckEvery, until ctx ends.
func (w *policyWatch) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.check(ctx)
		t.Reset(policyCheckEvery)
	}
}

// check runs one comparison: a warning when the set of instances with another digest changes
// (and while it is not empty, the metric says so), an info line when they agree again.
func (w *policyWatch) check(ctx context.Context) {
	insts, _, _, err := collectPolicyInstances(ctx, w.nc, policyCheckWait)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Debug().Err(err).Msg("policy check: could not ask the other instances")
		}
		return
	}
	if ctx.Err() != nil {
		return // cut short by the stop: not a full view
	}
	var others []policyInstance
	for _, in := range insts {
		if in.Role == w.role && in.Instance == w.instance {
			continue
		}
		others = append(others, in)
	}
	r := comparePolicies(others, w.digest)
	var bad []string
	for _, in := range r.Instances {
		if in.Match != nil && !*in.Match {
			bad = append(bad, in.Role+" "+in.Instance+" "+in.Digest)
		}
	}
	w.peers.Store(int64(len(others)))
	w.mismatched.Store(int64(len(bad)))
	key := strings.Join(bad, "\n")
	if key == w.last {
		return
	}
	w.last = key
	if len(bad) == 0 {
		w.log.Info().Str("policy", w.digest).Int("instances", len(others)).Msg("policy check: every other catalog replica and executor enforces this policy again")
		return
	}
	shown := bad[:min(len(bad), 10)]
	w.log.Warn().Str("policy", w.digest).Int("mismatched", len(bad)).Int("instances", len(others)).Strs("others", shown).
		Msg("policy check: MISMATCH: other instances enforce another policy than this one (search and calls disagree); give every indexer and executor the same policy section and restart them; see mcpstream policy check")
}

// newPolicyWatch returns the policy check of a role instance (run it with run) and adds its
// metrics to env's.
func newPolicyWatch(env *roleEnv, role, instance string) *policyWatch {
	w := &policyWatch{nc: env.NC, log: env.Log, role: role, instance: instance, digest: env.Policy.Digest()}
	env.addMetrics(policyMetrics(w))
	return w
}

// withPolicyWatch wraps a role's Run: the policy check runs beside it and has stopped when it
// returns (before the process's connection is drained).
func withPolicyWatch(w *policyWatch, run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.run(wctx)
		}()
		err := run(ctx)
		cancel()
		<-done
		return err
	}
}
