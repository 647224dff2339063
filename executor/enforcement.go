package executor

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
)

// enforcementVersion is the version of the canonical form EnforcementDigest hashes, and the
// prefix of every enforcement digest ("v1-..."), as policy.Digest's.
const enforcementVersion = 1

// canonicalEnforcement is what EnforcementDigest hashes: the settings of an executor that decide
// a call's answer besides the policy, normalized.
type canonicalEnforcement struct {
	// Kind keeps an enforcement digest from ever equalling a policy digest.
	Kind    string          `json:"kind"`
	V       int             `json:"v"`
	Tenant  *canonicalRate  `json:"tenant"`
	Servers []canonicalRate `json:"servers"`
	Tools   []canonicalRate `json:"tools"`
	Approve []string        `json:"approve"`
	// Durations in nanoseconds, sizes in bytes, defaults applied.
	CallTimeout        int64 `json:"callTimeout"`
	MaxCallTimeout     int64 `json:"maxCallTimeout"`
	ApprovalTimeout    int64 `json:"approvalTimeout"`
	MaxApprovalTimeout int64 `json:"maxApprovalTimeout"`
	MaxResultBytes     int   `json:"maxResultBytes"`
}

type canonicalRate struct {
	Key         string `json:"key,omitempty"` // server name or tool pattern
	PerSecond   string `json:"perSecond"`     // strconv 'g' (shortest exact form); "0" = no rate
	Burst       int64  `json:"burst"`         // the calls per window the rate allows (0 = no rate)
	Concurrency int    `json:"concurrency"`
}

// canonicalRateOf normalizes r to what it enforces: a rate without Burst is written with the
// burst it gets (max(1, ceil(PerSecond)), see Rate.window), a rate without PerSecond has none,
// and a negative concurrency is none.
func canonicalRateOf(key string, r Rate) canonicalRate {
	c := canonicalRate{Key: key, PerSecond: "0", Concurrency: max(r.Concurrency, 0)}
	if n, _ := r.window(); n > 0 {
		c.PerSecond, c.Burst = strconv.FormatFloat(r.PerSecond, 'g', -1, 64), n
	}
	return c
}

func (c canonicalRate) off() bool { return c.Burst == 0 && c.Concurrency == 0 }

// EnforcementDigest is a stable, short hash of what this configuration decides about a call
// besides the policy (policy.Policy.Digest covers that): "v1-" and 32 hex digits, in the form of
// policy.DigestPattern. Executors that share a calls stream must have the same one, or a call's
// answer depends on which of them takes it. It covers, with every default applied:
//
//   - Limits: the tenant limit, every server limit ("*" included) and every tool pattern's
//     limit, each as perSecond, the calls per window it allows (Burst, or the burst a rate
//     without one gets) and concurrency;
//   - Approve: the patterns of tools configured to need approval, as a set;
//   - CallTimeout, MaxCallTimeout, ApprovalTimeout and MaxApprovalTimeout: when a call times out
//     and how long it waits for approval;
//   - MaxResultBytes: which results are answered result_too_large.
//
// It is the same however the settings are written: map order, a limit whose fields are all zero
// given or left out (a server limit equal to the "*" one, or off without a "*" one, is the same
// as none; a tools section whose every limit is off is none; a tool pattern's limit is kept even
// when off, for it shadows less specific patterns), Burst left out or given as the burst it
// defaults to, a default given or left out (0 and the default are one), Approve's order and
// repetitions. Any change of what it covers changes it.
//
// It does not cover the policy, nor what is this process's own capacity or plumbing: Workers,
// MaxApprovalWaits (a share of Workers: executors of different sizes differ in it), the front
// end, Name, Secrets and AuditBytes (what the audit keeps), the consumer and state settings
// (AckWait, MaxDeliver, MaxAckPending, ClaimTTL, SlotLease), RetryMax, ReadyTimeout,
// ReconnectGrace, RelistTimeout, StopGrace and ReplyPrefixes.
func (c Config) EnforcementDigest() string {
	c = c.withDefaults()
	ce := canonicalEnforcement{
		Kind: "executor-enforcement", V: enforcementVersion,
		CallTimeout: int64(c.CallTimeout), MaxCallTimeout: int64(c.MaxCallTimeout),
		ApprovalTimeout: int64(c.ApprovalTimeout), MaxApprovalTimeout: int64(c.MaxApprovalTimeout),
		MaxResultBytes: c.MaxResultBytes,
	}
	if t := canonicalRateOf("", c.Limits.Tenant); !t.off() {
		ce.Tenant = &t
	}
	// A server without its own entry gets the "*" one (none without it): an entry equal to
	// what it would get anyway changes nothing.
	wild := canonicalRateOf("", c.Limits.Servers["*"])
	if !wild.off() {
		w := wild
		w.Key = "*"
		ce.Servers = append(ce.Servers, w)
	}
	for k, r := range c.Limits.Servers {
		if k == "*" {
			continue
		}
		if cr := canonicalRateOf(k, r); cr.Burst != wild.Burst || cr.PerSecond != wild.PerSecond || cr.Concurrency != wild.Concurrency {
			ce.Servers = append(ce.Servers, cr)
		}
	}
	anyTool := false
	for k, r := range c.Limits.Tools {
		cr := canonicalRateOf(k, r)
		anyTool = anyTool || !cr.off()
		ce.Tools = append(ce.Tools, cr)
	}
	if !anyTool {
		ce.Tools = nil
	}
	byKey := func(a, b canonicalRate) int { return cmp.Compare(a.Key, b.Key) }
	slices.SortFunc(ce.Servers, byKey)
	slices.SortFunc(ce.Tools, byKey)
	if len(c.Approve) > 0 {
		ce.Approve = slices.Compact(slices.Sorted(slices.Values(c.Approve)))
	}
	// Strings, integers, slices and pointers to them: marshalling cannot fail and is
	// deterministic.
	data, err := json.Marshal(ce)
	if err != nil {
		panic("executor: enforcement digest: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return "v" + strconv.Itoa(enforcementVersion) + "-" + hex.EncodeToString(sum[:16])
}
