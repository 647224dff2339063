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
	"sync"
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
//
// Executors also advertise an enforcement digest (executor.Config.EnforcementDigest: the limits
// section, approval patterns and call and approval timeouts), compared among executors only
// (catalog replicas enforce none of it). An instance without one (an older mcpstream) is
// unknown, never a mismatch.

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

Executors also enforce the limits section (rate limits and concurrency caps), approval patterns
and call and approval timeouts: each advertises an enforcement digest of them, compared among
executors only. Executors sharing the calls stream with different limits answer a call
differently depending on which one takes it.

  mcpstream policy check [--config FILE]   ask every instance, compare (exit status 1 on mismatch,
                                           3 when it could not check)
  mcpstream policy digest [--config FILE]  print the digest of a configuration's policy (and,
                                           with --config, its executors' enforcement digest)

See mcpstream policy check --help.`

const policyCheckHelp = `
Asks every catalog replica ($SRV.INFO.` + subjects.CatalogService + `) and every executor
($SRV.INFO.` + subjects.ExecutorService + `) for the digest of the policy it enforces, collecting the
answers for --wait, and prints each instance's role, instance (host:pid and replica) and digest.
With --config, each is compared with that file's policy; without, with each other.

Every executor also advertises an enforcement digest: its limits section, approval patterns and
call and approval timeouts (not its --workers or --max-approval-waits). The executors' are
compared with each other, or with the --config file's, in a second table; an executor of a
version without them is listed as unknown, not as a mismatch.

Exit status: 0 when every instance that answered enforces the same policy (the --config one when
given) and every executor the same enforcement digest; 1 when any differs, with a message naming
how many (ENFORCEMENT MISMATCH for executors' limits), and only then; 3 when it could not check,
nothing compared: no instance answered with a digest (none runs, they run a version without
digests, or the NATS user may not publish to $SRV.INFO.* or read its inbox), NATS could not be
reached or refused the request, the --config file could not be loaded, or the report could not be
written (stdout on a full disk, say) (stderr says which, as
"could not check: ..." but for no answer); 2 for bad flags. With --config, the warnings the
roles log when they load the file's policy (a pattern with the shape of an encoded public name,
which matches no tool) go to stderr too.

Executors started with --no-front-end answer too (every executor runs the discovery service).
A replica still rebuilding its catalog does not answer until it serves. --json prints
{"expected","expectedFrom","consistent","instances":[{"role","instance","id","digest","match",
"problem","enforcement","enforcementMatch","enforcementProblem"}],"digests":{DIGEST:COUNT},
"majority","mismatched","unknown","truncated","enforcement":{"expected","consistent","digests",
"majority","mismatched","unknown"}}: match only with --config; without it, "majority" is the
digest most instances have (none on a tie) and "mismatched" counts the others (every instance on
a tie). "consistent" is false on either mismatch; "mismatched" counts policy mismatches only, and
"enforcement" (present when an executor advertises an enforcement digest, or with --config)
counts the executors' alike.

Examples:
  mcpstream policy check
  mcpstream policy check --config /etc/mcpstream/mcpstream.yaml --wait 2s --json`

const policyDigestHelp = `
Prints the digest of the policy of --config (the open policy's without --config, as the roles
run without one): compare it with what the roles advertise (their start log, /metrics
mcpstream_policy_info, mcpstream policy check). With --config, a second line gives the
enforcement digest executors started with it advertise (limits section, approval patterns,
timeouts; /metrics mcpstream_executor_enforcement_info); --json always has it ("enforcement").
The configuration is checked as the roles check it, and the warnings they log when they load its
policy go to stderr; the servers' ${ENV_VAR} secrets need not be set.

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
	msg := "want a subcommand: check or digest"
	if len(args) > 0 {
		if s := closest(args[0], []string{"check", "digest"}); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", "policy "+s)
		}
	}
	usageError(fs, stderr, msg, args)
	return exitCode(2)
}

// localPolicy loads the policy of a configuration file ("" = the open policy, as roles started
// without --config enforce), names where it came from, and gives the enforcement digest that
// executors started with the file advertise. The file is read once for both.
func localPolicy(path string) (p *policy.Policy, from, enforcement string, err error) {
	p, from, enforcement, _, err = loadLocalPolicy(path)
	return p, from, enforcement, err
}

// loadLocalPolicy is localPolicy, with the load-time warnings of the file's policy
// (policy.Warnings: the roles log them when they load it).
func loadLocalPolicy(path string) (p *policy.Policy, from, enforcement string, warnings []policy.Warning, err error) {
	fc := &fileConfig{}
	p, from = policy.Open(), "no configuration (open policy)"
	if path != "" {
		if fc, err = loadConfigFor(path, os.LookupEnv, false); err != nil {
			return nil, "", "", nil, err
		}
		if p, err = policy.New(fc.Policy); err != nil {
			return nil, "", "", nil, fmt.Errorf("%s: policy: %w", path, err)
		}
		from = path
	}
	cfg, err := executorEnforcement(fc)
	if err != nil {
		return nil, "", "", nil, err
	}
	return p, from, cfg.EnforcementDigest(), policy.Warnings(fc.Policy), nil
}

// printPolicyWarnings writes the load-time warnings of the policy of the file path to stderr, one
// line each, as `mcpstream CMD: warning: FILE: policy: ...` (the roles log the same text when
// they load the file). Patterns and rule names come from the file: control characters show as
// '?'.
func printPolicyWarnings(stderr io.Writer, cmd, path string, warnings []policy.Warning) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "mcpstream %s: warning: %s: policy: %s\n", cmd, oneLine(path), oneLine(w.String()))
	}
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
	if flagGiven(fs, "config") && strings.TrimSpace(*configPath) == "" {
		usageError(fs, stderr, fmt.Sprintf("--config %q: want a configuration file (leave --config out for the open policy's digest)", *configPath), nil)
		return exitCode(2)
	}
	p, from, enf, warnings, err := loadLocalPolicy(*configPath)
	if err != nil {
		return err
	}
	printPolicyWarnings(stderr, "policy digest", *configPath, warnings)
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"digest": p.Digest(), "from": from, "open": p.IsOpen(), "enforcement": enf})
		_, err = fmt.Fprintf(stdout, "%s\n", termSafeJSON(b))
		return err
	}
	// The first line is the policy's, as before (scripts read its first field).
	if _, err = fmt.Fprintf(stdout, "%s  %s\n", p.Digest(), from); err != nil || *configPath == "" {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s  %s: executor enforcement (limits, approval patterns, timeouts)\n", enf, from)
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
	// Enforcement is an executor's enforcement digest (executor.Config.EnforcementDigest);
	// EnforcementMatch and EnforcementProblem are as Match and Problem. Catalog replicas have
	// none of the three.
	Enforcement        string `json:"enforcement,omitempty"`
	EnforcementMatch   *bool  `json:"enforcementMatch,omitempty"`
	EnforcementProblem string `json:"enforcementProblem,omitempty"`
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
	in.Digest, in.Problem = advertised(pi.PolicyDigest, "policy")
	if role == subjects.RoleExecutor {
		in.Enforcement, in.EnforcementProblem = advertised(pi.EnforcementDigest, "enforcement")
	}
	if pi.Role != "" && pi.Role != role {
		in.Problem = strings.TrimPrefix(in.Problem+"; ", "; ") + "advertises role " + truncate(oneLine(pi.Role), 32)
	}
	return in, true
}

// advertised is an instance's advertised digest of what ("policy", "enforcement") when it is one,
// or why there is none to compare.
func advertised(digest, what string) (string, string) {
	switch {
	case digest == "":
		return "", "no " + what + " digest advertised (mcpstream before " + what + " digests?)"
	case !policy.DigestPattern.MatchString(digest):
		return "", "malformed " + what + " digest"
	}
	return digest, ""
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
	// Enforcement compares the executors' enforcement digests (see compareEnforcement); nil
	// when no executor advertises one and none is expected.
	Enforcement *enforcementReport `json:"enforcement,omitempty"`
}

// enforcementReport is the comparison of the executors' enforcement digests, as policyReport's
// of the policy digests.
type enforcementReport struct {
	Expected   string         `json:"expected,omitempty"`
	Consistent bool           `json:"consistent"`
	Digests    map[string]int `json:"digests"`
	Majority   string         `json:"majority,omitempty"`
	Mismatched int            `json:"mismatched"`
	Unknown    int            `json:"unknown"` // executors without a usable enforcement digest
}

// tally counts digests ("" = unknown) against expected ("" = against each other): how many of
// each, the majority (without expected, when several differ and one is the most common), how
// many mismatch and are unknown, and each one's match (nil without expected or digest).
func tally(digests []string, expected string) (counts map[string]int, majority string, mismatched, unknown int, match []*bool) {
	counts, match = map[string]int{}, make([]*bool, len(digests))
	for i, d := range digests {
		if d == "" {
			unknown++
			continue
		}
		counts[d]++
		if expected != "" {
			m := d == expected
			match[i] = &m
			if !m {
				mismatched++
			}
		}
	}
	if expected == "" && len(counts) > 1 {
		// No reference: every digest outside the most common one differs, and every one when
		// several are the most common (nobody is the majority).
		most, tied := 0, 0
		for _, n := range counts {
			switch {
			case n > most:
				most, tied = n, 1
			case n == most:
				tied++
			}
		}
		mismatched = len(digests) - unknown
		if tied == 1 {
			mismatched -= most
			for d, n := range counts {
				if n == most {
					majority = d
				}
			}
		}
	}
	return counts, majority, mismatched, unknown, match
}

// comparePolicies compares the instances' digests with expected ("" = with each other).
func comparePolicies(insts []policyInstance, expected string) policyReport {
	r := policyReport{Expected: expected, Instances: insts}
	if r.Instances == nil {
		r.Instances = []policyInstance{}
	}
	digests := make([]string, len(r.Instances))
	for i, in := range r.Instances {
		digests[i] = in.Digest
	}
	var match []*bool
	r.Digests, r.Majority, r.Mismatched, r.Unknown, match = tally(digests, expected)
	for i := range r.Instances {
		r.Instances[i].Match = match[i]
	}
	r.Consistent = len(r.Digests) > 0 && r.Mismatched == 0
	return r
}

// compareEnforcement compares the executors' enforcement digests with expected ("" = with each
// other) into r.Enforcement (left nil when no executor advertises one and expected is ""), and
// makes r inconsistent on a mismatch. Catalog replicas are not compared.
func (r *policyReport) compareEnforcement(expected string) {
	var idx []int
	var digests []string
	advertised := false
	for i, in := range r.Instances {
		if in.Role == subjects.RoleExecutor {
			idx, digests = append(idx, i), append(digests, in.Enforcement)
			advertised = advertised || in.Enforcement != ""
		}
	}
	if !advertised && expected == "" {
		return
	}
	e := &enforcementReport{Expected: expected}
	var match []*bool
	e.Digests, e.Majority, e.Mismatched, e.Unknown, match = tally(digests, expected)
	for j, i := range idx {
		r.Instances[i].EnforcementMatch = match[j]
	}
	e.Consistent = e.Mismatched == 0
	r.Consistent = r.Consistent && e.Consistent
	r.Enforcement = e
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
	if flagGiven(fs, "config") && strings.TrimSpace(*configPath) == "" {
		usageError(fs, stderr, fmt.Sprintf("--config %q: want a configuration file (leave --config out to compare the instances with each other)", *configPath), nil)
		return exitCode(2)
	}
	if *wait <= 0 || *wait > time.Minute {
		usageError(fs, stderr, fmt.Sprintf("--wait %s: want more than 0, at most 1m", *wait), nil)
		return exitCode(2)
	}
	err = checkPolicies(ctx, cf, *configPath, *wait, stdout, stderr)
	if err != nil && !errors.As(err, new(exitCode)) {
		// Not a verdict: 1 is for a mismatch found, and a script must not take an outage (or a
		// file it cannot read) for one.
		fmt.Fprintf(stderr, "mcpstream policy check: could not check: %v\n", err)
		return exitCode(policyCheckFailed)
	}
	return err
}

// policyCheckFailed is the exit status of a policy check that compared nothing: no instance
// answered with a digest, NATS could not be reached or refused the request, or the --config
// file could not be loaded (1 is a mismatch found, 2 bad flags).
const policyCheckFailed = 3

// checkPolicies is policy check once its flags are read: an exitCode error for a verdict (a
// mismatch, no answer), any other error when it could not check.
func checkPolicies(ctx context.Context, cf clientFlags, configPath string, wait time.Duration, stdout, stderr io.Writer) error {
	expected, expectedEnf, from := "", "", ""
	if configPath != "" {
		p, src, enf, warnings, err := loadLocalPolicy(configPath)
		if err != nil {
			return err
		}
		printPolicyWarnings(stderr, "policy check", configPath, warnings)
		expected, expectedEnf, from = p.Digest(), enf, src
	}
	wctx, denied, onDenied := cf.watchPermissions(ctx, subjects.SRVInfo(subjects.CatalogService), subjects.SRVInfo(subjects.ExecutorService))
	defer denied(nil)
	nc, _, err := cf.connect("policy check", onDenied)
	if err != nil {
		return err
	}
	defer nc.Close()
	insts, bad, truncated, err := collectPolicyInstances(wctx, nc, wait)
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
	r.compareEnforcement(expectedEnf)
	r.ExpectedFrom, r.Truncated = from, truncated
	if bad > 0 {
		fmt.Fprintf(stderr, "mcpstream policy check: skipped %d answer(s) that are no catalog or executor service info\n", bad)
	}
	if err := writePolicyReport(stdout, r, cf.JSON); err != nil {
		return err
	}
	enfMismatched := r.Enforcement != nil && r.Enforcement.Mismatched > 0
	if enfMismatched {
		e := r.Enforcement
		if expectedEnf != "" {
			fmt.Fprintf(stderr, "mcpstream policy check: ENFORCEMENT MISMATCH: %d of %d executor(s) enforce other limits, approval patterns or timeouts than %s (%s); give every executor the same limits section and restart them\n",
				e.Mismatched, len(executorsOf(r))-e.Unknown, from, expectedEnf)
		} else {
			fmt.Fprintf(stderr, "mcpstream policy check: ENFORCEMENT MISMATCH: the executors enforce %d different sets of limits, approval patterns and timeouts (a call's answer depends on which one takes it); give every executor the same limits section and restart them (--config FILE names the right one)\n",
				len(e.Digests))
		}
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
	case enfMismatched:
		return exitCode(1)
	case len(r.Digests) == 0:
		fmt.Fprintf(stderr, "mcpstream policy check: no catalog replica or executor answered with a policy digest within %s (none running, a version without digests, or the NATS user may not publish to $SRV.INFO.*)\n", wait)
		return exitCode(policyCheckFailed)
	}
	return nil
}

// executorsOf returns the executors of r's instances.
func executorsOf(r policyReport) []policyInstance {
	var out []policyInstance
	for _, in := range r.Instances {
		if in.Role == subjects.RoleExecutor {
			out = append(out, in)
		}
	}
	return out
}

// writePolicyReport prints a check's report: JSON (one indented object) or a table and a summary.
func writePolicyReport(w io.Writer, r policyReport, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", termSafeJSON(b))
		return err
	}
	return printPolicyReport(w, r)
}

// digestVerdict is the text report's word for an instance's digest: ok or MISMATCH against the
// expected one (match, from tally), else against the others (n distinct digests, the most
// common majority); "" when there is nothing to say.
func digestVerdict(match *bool, digest string, n int, majority string) string {
	switch {
	case match != nil && *match:
		return "ok"
	case match != nil:
		return "MISMATCH"
	case n == 1:
		return "ok"
	case digest == majority:
		return "majority"
	case n > 1:
		return "differs"
	}
	return ""
}

func printPolicyReport(stdout io.Writer, r policyReport) error {
	// Every write's error is the report's, the summary's too: a check whose verdict was not
	// printed could not check (3), not a mismatch (1, the status of an output not written).
	w := &outputWriter{w: stdout}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tINSTANCE\tDIGEST\tPOLICY")
	for _, in := range r.Instances {
		verdict := "-"
		if in.Problem != "" && in.Digest == "" {
			verdict = "unknown: " + in.Problem
		} else if v := digestVerdict(in.Match, in.Digest, len(r.Digests), r.Majority); v != "" {
			verdict = v
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Role, dash(in.Instance), dash(in.Digest), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if e := r.Enforcement; e != nil {
		// The executors' limits, approval patterns and timeouts: a table of their own, so that
		// the policy table's lines stay as they were.
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTOR\tENFORCEMENT\tLIMITS")
		for _, in := range executorsOf(r) {
			verdict := "-"
			if in.Enforcement == "" {
				verdict = "unknown: " + dash(in.EnforcementProblem)
			} else if v := digestVerdict(in.EnforcementMatch, in.Enforcement, len(e.Digests), e.Majority); v != "" {
				verdict = v
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", dash(in.Instance), dash(in.Enforcement), verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
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
	if r.Enforcement != nil && r.Enforcement.Expected != "" {
		fmt.Fprintf(w, "expected executor enforcement %s (%s)\n", r.Enforcement.Expected, r.ExpectedFrom)
	}
	switch {
	case r.Mismatched > 0:
		fmt.Fprintf(w, "MISMATCH: %d instance(s) enforce another policy\n", r.Mismatched)
	case len(r.Digests) > 0: // the policy is consistent (the executors' limits are below)
		fmt.Fprintln(w, "ok: every instance that answered enforces the same policy")
	}
	if r.Unknown > 0 {
		fmt.Fprintf(w, "%d instance(s) advertise no usable digest: not checked\n", r.Unknown)
	}
	if e := r.Enforcement; e != nil {
		if e.Mismatched > 0 {
			fmt.Fprintf(w, "ENFORCEMENT MISMATCH: %d executor(s) enforce other limits, approval patterns or timeouts\n", e.Mismatched)
		}
		if e.Unknown > 0 {
			fmt.Fprintf(w, "%d executor(s) advertise no usable enforcement digest: not checked\n", e.Unknown)
		}
	}
	return w.failed()
}

// policyCheckEvery is how often a role compares its policy digest with every other instance's.
var policyCheckEvery = 30 * time.Second

// policyCheckWait is how long a role's check collects answers.
const policyCheckWait = time.Second

// policyWatch is a role's own policy check: at start and every policyCheckEvery it asks every
// catalog replica and executor for their digests and warns when one differs from its own. An
// executor's also compares its enforcement digest with every other executor's.
type policyWatch struct {
	nc       *nats.Conn
	log      zerolog.Logger
	role     string // subjects.RoleIndexer or RoleExecutor
	instance string // this instance (left out of peers)
	digest   string
	// enforcement is an executor's enforcement digest ("" for a catalog replica: no
	// enforcement check).
	enforcement string

	peers      atomic.Int64 // other instances that answered the last check
	mismatched atomic.Int64 // of them, those with another digest
	last       string       // the mismatched instances last logged (run's goroutine only)

	enfPeers      atomic.Int64 // other executors that answered the last check with an enforcement digest
	enfMismatched atomic.Int64 // of them, those with another one
	enfUnknown    atomic.Int64 // other executors without a usable one (an older mcpstream)
	enfLast       string       // as last, for the enforcement digests
	// shared is what the policy checks of this process's roles logged (nil: not shared).
	shared *lastLogged
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
	if w.enforcement != "" {
		w.checkEnforcement(others)
	}
	key := strings.Join(bad, "\n")
	if key == w.last {
		return
	}
	w.last = key
	if w.shared != nil && !w.shared.first(w.digest, key) {
		return // another role of this process, with this policy, said it already
	}
	if len(bad) == 0 {
		w.log.Info().Str("policy", w.digest).Int("instances", len(others)).Msg("policy check: every other catalog replica and executor enforces this policy again")
		return
	}
	shown := bad[:min(len(bad), 10)]
	w.log.Warn().Str("policy", w.digest).Int("mismatched", len(bad)).Int("instances", len(others)).Strs("others", shown).
		Msg("policy check: MISMATCH: other instances enforce another policy than this one (search and calls disagree); give every indexer and executor the same policy section and restart them; see mcpstream policy check")
}

// checkEnforcement compares the enforcement digests of the other executors with this one's, as
// check the policy digests: a warning when the set of executors that differ changes, an info
// line when they agree again. An executor without one is unknown, not a mismatch.
func (w *policyWatch) checkEnforcement(others []policyInstance) {
	var bad []string
	var peers, unknown int64
	for _, in := range others {
		switch {
		case in.Role != subjects.RoleExecutor:
		case in.Enforcement == "":
			unknown++
		case in.Enforcement != w.enforcement:
			bad = append(bad, in.Instance+" "+in.Enforcement)
			peers++
		default:
			peers++
		}
	}
	w.enfPeers.Store(peers)
	w.enfUnknown.Store(unknown)
	w.enfMismatched.Store(int64(len(bad)))
	key := strings.Join(bad, "\n")
	if key == w.enfLast {
		return
	}
	w.enfLast = key
	if len(bad) == 0 {
		w.log.Info().Str("enforcement", w.enforcement).Int64("executors", peers).Msg("enforcement check: every other executor enforces these limits, approval patterns and timeouts again")
		return
	}
	w.log.Warn().Str("enforcement", w.enforcement).Int("mismatched", len(bad)).Int64("executors", peers).Strs("others", bad[:min(len(bad), 10)]).
		Msg("enforcement check: MISMATCH: other executors enforce other limits, approval patterns or timeouts than this one (a call's answer depends on which executor takes it); give every executor the same limits section and restart them; see mcpstream policy check")
}

// lastLogged remembers, for each policy digest, the mismatched instances the policy checks of one
// process (its roleEnv) last logged: the catalog replica and the executor of one `up` see the
// same others, and the same change is logged once, not by each role. (The metrics stay per
// role.)
type lastLogged struct {
	mu   sync.Mutex
	last map[string]string // digest → the last key logged
}

// first reports whether key is news for digest (and records it): false when a check with the
// same digest in this process logged that very key last.
func (l *lastLogged) first(digest, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.last[digest]; ok && prev == key {
		return false
	}
	l.last[digest] = key
	return true
}

// newPolicyWatch returns the policy check of a role instance (run it with run) and adds its
// metrics to env's. enforcement is an executor's enforcement digest ("" for other roles).
func newPolicyWatch(env *roleEnv, role, instance, enforcement string) *policyWatch {
	w := &policyWatch{nc: env.NC, log: env.Log, role: role, instance: instance, digest: env.Policy.Digest(), enforcement: enforcement,
		shared: env.policyLog}
	env.addMetrics(policyMetrics(w))
	if enforcement != "" {
		env.addMetrics(enforcementMetrics(w))
	}
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
