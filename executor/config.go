package executor

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/policy"
)

// Config configures an Executor. The zero value of every field means its default.
type Config struct {
	// Policy authorizes principals; nil → policy.Open().
	Policy *policy.Policy
	// Dispatcher runs tools/call; nil → a NATS client of subjects.Dispatch(server) (the
	// registrysync connectors of any process).
	Dispatcher Dispatcher
	// Relister re-lists a server whose ttlMs ran out; nil → a NATS client of
	// subjects.Relist(server).
	Relister Relister
	// Limits are the rate limits and concurrency caps, enforced across every worker.
	Limits Limits
	// Secrets are values (passwords, tokens) to redact from audit events, e.g. every
	// registrysync.ServerConfig.Secrets value.
	Secrets []string
	// Approve lists server__tool glob patterns (policy.MatchTool, as in policy rules) of tools
	// that need approval besides what the policy says (tools "configured destructive"). New
	// refuses a pattern that could match nothing (policy.ValidPattern).
	Approve []string

	// Workers is how many calls this process handles at once; 0 → 64.
	Workers int
	// FrontEnd serves subjects.ExecAll (request/reply); nil → true. Workers-only processes set
	// it false.
	FrontEnd *bool
	// NoWorkers runs only the front end (and the registry view is not consumed).
	NoWorkers bool
	// StreamWriteError, if set, reports the write error of a stream's store (the NATS server's
	// own: natsembed.Server.StreamWriteError), nil while it has none. A store that failed a
	// write (a full disk: no space left on device) stores nothing more, and JetStream answers
	// no publish on it: with no PubAck, the front end asks this, and refuses a call the calls
	// stream could not store (unavailable) instead of answering its outcome unknown.
	StreamWriteError func(stream string) error

	// CallTimeout bounds one tools/call when the request gives none; 0 → 60s.
	CallTimeout time.Duration
	// MaxCallTimeout caps a request's timeoutMs; 0 → 10 minutes.
	MaxCallTimeout time.Duration
	// ApprovalTimeout bounds the wait in needs_approval when the request gives none; 0 → 5 min.
	ApprovalTimeout time.Duration
	// MaxApprovalTimeout caps a request's approvalTimeoutMs; 0 → 1 hour.
	MaxApprovalTimeout time.Duration
	// MaxApprovalWaits caps the calls of this process waiting for approval at once, or, approved,
	// for a concurrency slot: each holds a worker while it waits (up to MaxApprovalTimeout, then
	// its timeout), and workers are shared by every tenant. A call that needs approval past it is refused rate_limited. 0 → Workers/2 (at
	// least 1), so that at least half the workers serve calls that need none.
	MaxApprovalWaits int
	// AckWait is the consumer's ack wait: how long after a crashed worker a call is redelivered.
	// Long calls and approval waits send progress heartbeats every AckWait/3; 0 → 30s.
	AckWait time.Duration
	// MaxDeliver is how often a call is delivered before it is answered without execution
	// (internal, or outcome_unknown when it was claimed); 0 → 5.
	MaxDeliver int
	// MaxAckPending caps the calls in flight over every worker of every process; 0 → 4096.
	MaxAckPending int
	// MaxResultBytes caps a tool result; a larger one answers result_too_large; 0 → 4 MiB.
	MaxResultBytes int
	// AuditBytes caps the arguments and result kept in one audit event; 0 → 4 KiB.
	AuditBytes int
	// ClaimTTL is how long claims of side-effecting calls are kept; 0 → 24h (the results
	// stream's retention). It must be at least as long as a call may stay unanswered
	// (MaxCallTimeout + MaxApprovalTimeout + MaxDeliver × AckWait, and 10 minutes at least):
	// Run and EnsureState refuse a shorter one, and an existing claims bucket whose TTL is
	// shorter.
	ClaimTTL time.Duration
	// SlotLease is the lease of a concurrency slot, renewed while the call runs; a crashed
	// worker's slot comes back after the longest its call may run plus SlotLease (the
	// connector runs the call until its deadline on its own, whatever becomes of the worker);
	// 0 → 30s. Each slot has its own TTL (per-key TTLs, nats-server 2.11 or later): its call's
	// timeout plus SlotLease and a second from when it is taken; the slots bucket's TTL is
	// max(MaxCallTimeout, CallTimeout) + 2 × SlotLease + 1s, raised in place on an existing
	// bucket that keeps slots less long. Without per-key TTLs (an older nats-server) it is the
	// TTL of the slots bucket the executor creates, a dispatched call's slot is held no longer,
	// an existing bucket keeps its own TTL, and slots are renewed within the shorter of the two.
	SlotLease time.Duration
	// RetryMax bounds the attempts of a read-only or idempotent call on safe failures; 0 → 3.
	RetryMax int
	// ReadyTimeout bounds the registry replay before workers start; 0 → 30s.
	ReadyTimeout time.Duration
	// ReconnectGrace is how long after the executor starts a call to a server that is
	// connecting, or whose connector stopped or fell silent, waits for it to be ready (at most
	// the call's timeout) instead of being refused unavailable: after a restart, the calls
	// queued while everything was down are taken before the connectors are back. So too a call
	// its connector refuses unsent (not connected yet) while the server's status says ready:
	// after a crash that is the dead connector's last status. 0 → 30s; negative: no wait.
	ReconnectGrace time.Duration
	// RelistTimeout bounds a re-list of an expired tool list; 0 → 10s.
	RelistTimeout time.Duration
	// StopGrace bounds how long Run waits, once stopping, for dispatched calls to finish; calls
	// still running then are answered by another executor after AckWait (outcome_unknown for
	// side-effecting tools); 0 → 10s.
	StopGrace time.Duration
	// ReplyPrefixes are the subject prefixes a call's subjects.HeaderReplyTo may name (the
	// answer is published there too); nil → ["_INBOX."] (nats.go's default inbox prefix). A
	// subject subjects.Answerable refuses (mcpstream's own, the server's "$" ones) is never one,
	// whatever the prefixes. A
	// front end whose caller's reply subject is not under one of them waits for the answer on
	// the results stream and relays it instead.
	ReplyPrefixes []string
	// MemoryState stores the claims bucket in memory (tests, benchmarks).
	MemoryState bool
	// Log receives diagnostics; the zero value logs nothing.
	Log zerolog.Logger
	// Name tells processes apart in logs and claims; "" → the host name and pid.
	Name string

	// hooks are called at moments tests wait for; none in production.
	hooks testHooks
}

// testHooks are the calls of Config.hooks, each nil when not set.
type testHooks struct {
	// maxRemembered bounds the removed tool names the registry remembers a server instead of
	// staleness.MaxRemembered (0): a test of the bound then needs a list of a few dozen tools,
	// not 50,000 (which took the executor and the catalog most of a minute under -race on a
	// loaded machine).
	maxRemembered int
	// approvalDecided: a delivery of call id has the decision its approval wait goes on with:
	// elsewhere when that is the outcome another delivery of the call recorded
	// (decidedElsewhere), else this delivery's own.
	approvalDecided func(id string, delivery uint64, elsewhere bool)
	// slotBusy: approved call id found a concurrency cap full and waits for a slot
	// (slotsWhenFree).
	slotBusy func(id string)
	// rateClock is the limiter's clock instead of time.Now (which rate window a call counts in).
	rateClock func() time.Time
	// hostClock is the host's clock as the limiter and claims read it instead of time.Now (a
	// host whose clock is off); unlike rateClock, the limiter still follows the NATS server's
	// clock.
	hostClock func() time.Time
	// approvalCheck: the request at calls stream sequence seq of call id is about to look
	// whether another request of the id waits for approval (see approvalConflict).
	approvalCheck func(id string, seq uint64)
	// resultsInfoEvery is how long the results stream's max_bytes, as last looked up, is used
	// (0: resultsInfoEvery; negative: looked up for every answer).
	resultsInfoEvery time.Duration
	// slotsUpdate: ensureSlots read the slots bucket's config and is about to raise its TTL
	// (before), or raised it and is about to read it again (!before).
	slotsUpdate func(before bool)
	// restoreWait replaces restoreWait (0: it).
	restoreWait time.Duration
	// registryApplied: the registry consumer applied the event at stream sequence seq (it
	// applies the next once this returns).
	registryApplied func(seq uint64)
	// registryWait: a call waits for the registry view to catch up with the stream (see
	// registry.caughtUp).
	registryWait func()
}

// Limits are the executor's rate limits and concurrency caps (the configuration's limits section).
type Limits struct {
	// Tenant applies to each tenant separately.
	Tenant Rate
	// Servers maps a server name to its limit; "*" applies to every server without its own entry.
	Servers map[string]Rate
	// Tools maps a server__tool glob pattern (policy.MatchTool, as in policy rules) to a limit
	// applied to each matching tool separately; of the patterns that match, the most specific
	// applies: an exact name, else the longest pattern.
	Tools map[string]Rate

	order []string // Tools' patterns, most specific first (set by New; nil: sorted per call)
}

// capped reports whether any limit has a concurrency cap.
func (l Limits) capped() bool {
	if l.Tenant.Concurrency > 0 {
		return true
	}
	for _, m := range []map[string]Rate{l.Servers, l.Tools} {
		for _, r := range m {
			if r.Concurrency > 0 {
				return true
			}
		}
	}
	return false
}

// Rate is one limit: a sliding-window rate and a cap on calls in flight. Zero (or negative)
// fields are off; New refuses a NaN PerSecond.
//
// The rate allows Burst calls per window of Burst/PerSecond seconds, sliding (without Burst:
// max(1, ceil(PerSecond)) calls per window), which averages PerSecond; across a window boundary
// up to 2×Burst calls can fall within one window's span (see limiter).
type Rate struct {
	PerSecond   float64
	Burst       int
	Concurrency int
}

// Defaults.
const (
	DefaultWorkers            = 64
	DefaultCallTimeout        = 60 * time.Second
	DefaultMaxCallTimeout     = 10 * time.Minute
	DefaultApprovalTimeout    = 5 * time.Minute
	DefaultMaxApprovalTimeout = time.Hour
	DefaultAckWait            = 30 * time.Second
	DefaultMaxDeliver         = 5
	DefaultMaxAckPending      = 4096
	DefaultMaxResultBytes     = 4 << 20
	DefaultAuditBytes         = 4 << 10
	DefaultClaimTTL           = 24 * time.Hour
	DefaultSlotLease          = 30 * time.Second
	DefaultRetryMax           = 3
	DefaultReadyTimeout       = 30 * time.Second
	DefaultReconnectGrace     = 30 * time.Second
	DefaultRelistTimeout      = 10 * time.Second
	DefaultStopGrace          = 10 * time.Second
	DefaultReplyPrefix        = "_INBOX."
)

func (c Config) withDefaults() Config {
	d := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	i := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Policy == nil {
		c.Policy = policy.Open()
	}
	if c.ReplyPrefixes == nil {
		c.ReplyPrefixes = []string{DefaultReplyPrefix}
	}
	if c.FrontEnd == nil {
		t := true
		c.FrontEnd = &t
	}
	i(&c.Workers, DefaultWorkers)
	d(&c.CallTimeout, DefaultCallTimeout)
	d(&c.MaxCallTimeout, DefaultMaxCallTimeout)
	d(&c.ApprovalTimeout, DefaultApprovalTimeout)
	d(&c.MaxApprovalTimeout, DefaultMaxApprovalTimeout)
	i(&c.MaxApprovalWaits, max(1, c.Workers/2))
	d(&c.AckWait, DefaultAckWait)
	i(&c.MaxDeliver, DefaultMaxDeliver)
	i(&c.MaxAckPending, DefaultMaxAckPending)
	i(&c.MaxResultBytes, DefaultMaxResultBytes)
	i(&c.AuditBytes, DefaultAuditBytes)
	d(&c.ClaimTTL, DefaultClaimTTL)
	d(&c.SlotLease, DefaultSlotLease)
	i(&c.RetryMax, DefaultRetryMax)
	d(&c.ReadyTimeout, DefaultReadyTimeout)
	if c.ReconnectGrace == 0 {
		c.ReconnectGrace = DefaultReconnectGrace
	}
	d(&c.RelistTimeout, DefaultRelistTimeout)
	d(&c.StopGrace, DefaultStopGrace)
	return c
}

// requestWait is a request's own bound of ms milliseconds (timeoutMs, approvalTimeoutMs) capped
// at limit, or def when it gives none (ms ≤ 0). The cap comes before the conversion: a huge
// ms multiplied into a time.Duration overflows, to a negative duration (a call that times out
// before it is sent, an approval wait that ends at once) or any other.
func requestWait(ms int64, def, limit time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	if ms >= limit.Milliseconds() {
		return limit
	}
	return time.Duration(ms) * time.Millisecond
}
