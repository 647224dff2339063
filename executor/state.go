package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// minLimitsRetention is the shortest retention of rate counters.
const minLimitsRetention = 3 * time.Minute

// LimitsStreamConfig is the counter stream of rate windows, keeping each counter long enough for
// the longest window of limits.
func LimitsStreamConfig(limits Limits, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              subjects.LimitsStream,
		Description:       "mcpstream executor rate-limit counters (sliding windows, Nats-Incr)",
		Subjects:          []string{subjects.LimitsAll},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.MemoryStorage,
		Replicas:          max(replicas, 1),
		MaxMsgsPerSubject: 1,
		MaxAge:            max(minLimitsRetention, 2*limits.maxWindowOf()+time.Minute),
		Discard:           jetstream.DiscardOld,
		AllowMsgCounter:   true,
		AllowDirect:       true,
	}
}

// ClaimsConfig is the KV bucket of claims of side-effecting calls.
func ClaimsConfig(ttl time.Duration, memory bool, replicas int) jetstream.KeyValueConfig {
	storage := jetstream.FileStorage
	if memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.KeyValueConfig{
		Bucket:      subjects.InflightBucket,
		Description: "mcpstream executor claims: a side-effecting call is claimed before dispatch, never dispatched twice",
		History:     1,
		TTL:         ttl,
		Storage:     storage,
		Replicas:    max(replicas, 1),
	}
}

// SlotsConfig is the KV bucket of concurrency slots. Each slot is written with a TTL of its own
// (per-key TTLs, nats-server 2.11 or later; LimitMarkerTTL turns them on): its call's timeout
// plus the lease and a second, and at least the call's deadline plus the lease once it is
// dispatched (see takeSlot, lease.holdUntil). The bucket's TTL, hold, bounds every slot
// (JetStream removes a message past the stream's MaxAge whatever its own TTL), and alone frees
// those written without one (by an older executor): it must be at least the longest a
// dispatched call holds its slot, as a shorter one frees the slot while the call may still run.
// On a server without per-key TTLs (ensureSlots), the bucket's TTL is the lease.
func SlotsConfig(lease, hold time.Duration, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         subjects.SlotsBucket,
		Description:    "mcpstream executor concurrency slots (leases)",
		History:        1,
		TTL:            max(hold, lease),
		LimitMarkerTTL: max(lease, time.Second),
		Storage:        jetstream.MemoryStorage,
		Replicas:       max(replicas, 1),
	}
}

// slotHold is the longest a slot may be held without being renewed, the bucket's TTL: the
// longest call's deadline plus the lease (see SlotsConfig), with a lease more for the per-key
// TTLs' rounding up to whole seconds. The longest call is MaxCallTimeout's, or CallTimeout's
// when that is longer: it is the timeout of a request without timeoutMs, which MaxCallTimeout
// does not cap (see requestWait).
func (c Config) slotHold() time.Duration {
	return max(c.MaxCallTimeout, c.CallTimeout) + 2*c.SlotLease + time.Second
}

// ensureSlots declares the slots bucket (ensureKV) and reports why it takes no per-key TTLs (""
// when it takes them). A bucket without them (declared by an older mcpstream) is given them in
// place, its TTL raised to hold once it has them; a NATS server before 2.11 has none: the
// bucket is declared as before (its TTL the lease), and a crashed executor's slot may then be
// freed while its call still runs. So it is too when JetStream refuses to give the bucket
// per-key TTLs (the executor's NATS user may not update streams, say): the reason is the
// refusal. A TTL that cannot be raised is an error (ErrLimits) saying what to do. The TTL is
// never lowered (another executor may need a longer one), and read again after it is raised: a
// stream's config is updated whole, without compare-and-set, and an executor needing less
// that read it before this one raised it writes its own TTL over this one's; it is raised
// again then (slotsUpdateTries times at most).
func ensureSlots(ctx context.Context, js jetstream.JetStream, cfg Config, replicas int) (jetstream.KeyValue, string, error) {
	scfg := SlotsConfig(cfg.SlotLease, cfg.slotHold(), replicas)
	// hold is the TTL a bucket taking per-key TTLs needs, also when the bucket was declared
	// with the lease (API level 0: a meta leader before 2.11 answered) and a later leader gives
	// it per-key TTLs (a rolling upgrade).
	hold := scfg.TTL
	kv, err := ensureKV(ctx, js, scfg)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		scfg.TTL, scfg.LimitMarkerTTL = cfg.SlotLease, 0
		kv, err = ensureKV(ctx, js, scfg)
	}
	if err != nil {
		return nil, "", err
	}
	name := "KV_" + subjects.SlotsBucket
	for turnedOn, raised := 0, 0; ; {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, "", fmt.Errorf("bucket %s: %w", subjects.SlotsBucket, err)
		}
		cur := s.CachedInfo().Config
		if !cur.AllowMsgTTL {
			if turnedOn == slotsUpdateTries {
				return kv, fmt.Sprintf("stream %s kept allow_msg_ttl off after it was turned on %d times (declared again by an older mcpstream?)", name, turnedOn), nil
			}
			// (turned on alone first: a server before 2.11 ignores it, and would keep the raised
			// TTL for slots without TTLs of their own)
			up := cur
			up.AllowMsgTTL = true
			info, err := js.UpdateStream(ctx, up)
			if err != nil {
				return kv, msgTTLRefused(js.Conn(), name, err), nil
			}
			if !info.CachedInfo().Config.AllowMsgTTL {
				return kv, "nats-server before 2.11: stream " + name + " kept allow_msg_ttl off", nil
			}
			turnedOn++
			continue // read again: the update wrote back the TTL as it was read
		}
		if cur.MaxAge <= 0 || cur.MaxAge >= hold {
			return kv, "", nil
		}
		if raised == slotsUpdateTries {
			return nil, "", fmt.Errorf("%w: bucket %s: its TTL is %s after raising it %d times to %s, the longest a call may hold its slot: "+
				"another process keeps lowering it (an executor of another mcpstream version, or a tool editing stream %s): "+
				"slots would be freed while their calls still run; stop what lowers it, raise it (nats stream edit %s --max-age=%s) "+
				"and start the executor again", ErrLimits, subjects.SlotsBucket, cur.MaxAge, raised, hold, name, name, hold)
		}
		up := cur
		up.MaxAge = hold
		if cfg.hooks.slotsUpdate != nil {
			cfg.hooks.slotsUpdate(true)
		}
		if _, err := js.UpdateStream(ctx, up); err != nil {
			return nil, "", fmt.Errorf("%w: bucket %s: its TTL is %s, shorter than the longest a call may hold its slot (%s: "+
				"max(MaxCallTimeout, CallTimeout) + 2 × SlotLease + 1 s), and raising it was refused: %w; raise it "+
				"(nats stream edit %s --max-age=%s), or let the executor's NATS user update the stream "+
				"($JS.API.STREAM.UPDATE.%s), and start the executor again", ErrLimits, subjects.SlotsBucket, cur.MaxAge, hold, err,
				name, hold, name)
		}
		raised++
		if cfg.hooks.slotsUpdate != nil {
			cfg.hooks.slotsUpdate(false)
		}
	}
}

// slotsUpdateTries bounds how many times ensureSlots raises the slots bucket's TTL, and how
// many times it turns its per-key TTLs on.
const slotsUpdateTries = 5

// msgTTLRefused is why stream name (the slots bucket) takes no per-key TTLs when JetStream
// answered turning them on with err: a nats-server before 2.11 (the connected one's version),
// else the refusal itself (the executor's NATS user may not update streams, a cluster without
// a leader, …), with what the operator can do.
func msgTTLRefused(nc *nats.Conn, name string, err error) string {
	if v := nc.ConnectedServerVersion(); serverBefore211(v) {
		return fmt.Sprintf("nats-server %s, before 2.11: turning on allow_msg_ttl for stream %s: %v", v, name, err)
	}
	return fmt.Sprintf("turning on allow_msg_ttl for stream %s was refused: %v; let the executor's NATS user update the stream "+
		"($JS.API.STREAM.UPDATE.%s) and start the executor again, or turn it on by hand (nats stream edit %s)", name, err, name, name)
}

// serverBefore211 reports whether version (a nats-server's, as its INFO gives it) is before 2.11;
// false when it is not known.
func serverBefore211(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(version, "v"), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major < 2 || major == 2 && minor < 11
}

// maxWaiting is the calls consumer's MaxWaiting: how many pull requests may wait on it, one per
// executor worker.
const maxWaiting = 4096

// MaxWorkers bounds Config.Workers of one executor: each worker keeps a pull request waiting on
// the calls consumer, which takes maxWaiting of them over every executor.
const MaxWorkers = maxWaiting

// lastDeliveryRetries is how many more deliveries the consumer makes after MaxDeliver, for the
// answer given at MaxDeliver (see ConsumerConfig).
const lastDeliveryRetries = 5

// ConsumerConfig is the durable pull consumer every executor worker shares on the calls stream.
func ConsumerConfig(cfg Config) jetstream.ConsumerConfig {
	cfg = cfg.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       subjects.ExecutorConsumer,
		Description:   "mcpstream executor workers",
		FilterSubject: subjects.CallsAll,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		// The workers answer a call at its MaxDeliver-th delivery without running it; the
		// consumer delivers a few more times, so that answer is not lost when storing it fails
		// transiently (a nak at the consumer's last delivery would drop the call unanswered).
		MaxDeliver: cfg.MaxDeliver + lastDeliveryRetries,
		// Every worker keeps a pull request waiting (see Executor.Run): room for 4096 workers
		// over every executor (the server's default is 512).
		MaxWaiting:    maxWaiting,
		MaxAckPending: cfg.MaxAckPending,
	}
}

// state is the JetStream state the executor uses.
type state struct {
	results jetstream.Stream
	limits  jetstream.Stream
	claims  jetstream.KeyValue
	slots   jetstream.KeyValue
	calls   jetstream.Consumer
	// slotTTLs: the slots bucket takes per-key TTLs (see ensureSlots); else slotsNoTTLs says why.
	slotTTLs    bool
	slotsNoTTLs string
}

// EnsureState declares, idempotently, what the executor needs besides subjects.Streams: the
// limits counter stream, the claims and slots buckets and the workers' consumer. An existing
// stream or bucket keeps its replica count. What it cannot use is refused (ErrConfig, or the
// declaration's error), naming what was found and what to do: a limits stream JetStream cannot
// change in place (no message counters, other storage), a bucket whose stream does not take its
// subjects, a claims bucket in memory storage when files are asked for, another consumer taking
// the calls stream's subjects.
func EnsureState(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	_, err := ensureState(ctx, js, cfg.withDefaults(), true)
	return err
}

func ensureState(ctx context.Context, js jetstream.JetStream, cfg Config, consumer bool) (*state, error) {
	var st state
	var err error
	if st.results, err = js.Stream(ctx, subjects.ResultsStream); err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	replicas := st.results.CachedInfo().Config.Replicas
	// A second try when another executor created the stream between the look and the create
	// (executors starting at once, or declaring it again after a NATS restart, with other
	// windows): the stream is declared again over the one it made.
	for try := 1; ; try++ {
		lcfg := LimitsStreamConfig(cfg.Limits, replicas)
		var cur *jetstream.StreamConfig
		if s, err := js.Stream(ctx, lcfg.Name); err == nil {
			cur = &s.CachedInfo().Config
			if foreign := subjects.ForeignSubjects(*cur); len(foreign) > 0 {
				return nil, fmt.Errorf("limits stream %s holds subjects that are not mcpstream's (%s): mcpstream would replace them "+
					"and their messages would stop being stored; if it is another application's, give mcpstream its own NATS "+
					"account; if those subjects are no longer used, remove them (nats stream edit %s) or delete the stream "+
					"(nats stream rm %s)", cur.Name, strings.Join(foreign, ", "), cur.Name, cur.Name)
			}
			lcfg.Replicas = cur.Replicas
			if old := cur.MaxAge; old > lcfg.MaxAge {
				lcfg.MaxAge = old // another process has longer windows
			}
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("limits stream: %w", err)
		}
		st.limits, err = js.CreateOrUpdateStream(ctx, lcfg)
		if cur == nil && try < 3 && errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("limits stream: %w%s", err, limitsStreamHint(err, lcfg, cur))
		}
		break
	}
	lcfg := st.limits.CachedInfo().Config
	if !st.limits.CachedInfo().Config.AllowMsgCounter && cfg.Limits.maxWindowOf() > 0 {
		// A nats-server before 2.12 ignores AllowMsgCounter and Nats-Incr: the stream is a plain
		// one, no increment returns a total, and every call with a rate would be refused
		// unavailable. Refused at start instead (concurrency caps alone need no counters).
		return nil, fmt.Errorf("%w: stream %s is not a counter stream: rate limits need nats-server 2.12 or later", ErrLimits, lcfg.Name)
	}
	if cfg.ClaimTTL < cfg.minClaimTTL() {
		return nil, fmt.Errorf("%w: ClaimTTL %s is shorter than a call may stay unanswered (%s: the longest call and approval wait, every delivery's ack wait, and the calls stream's de-duplication window): a redelivery or resend could find no claim and run a side-effecting call again", ErrConfig, cfg.ClaimTTL, cfg.minClaimTTL())
	}
	if st.claims, err = ensureKV(ctx, js, ClaimsConfig(cfg.ClaimTTL, cfg.MemoryState, replicas)); err != nil {
		return nil, err
	}
	if ks, err := st.claims.Status(ctx); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", subjects.InflightBucket, err)
	} else if ttl := ks.TTL(); ttl > 0 && ttl < cfg.minClaimTTL() {
		// A bucket that exists keeps its TTL (declared by hand, or by a process with another
		// ClaimTTL): claims it forgets too soon break the at-most-once promise.
		return nil, fmt.Errorf("%w: bucket %s keeps claims %s, shorter than a call may stay unanswered (%s): a redelivery or resend could run a side-effecting call again; remove the bucket when no call is in flight (nats kv rm %s) so that it is declared again", ErrConfig, subjects.InflightBucket, ttl, cfg.minClaimTTL(), subjects.InflightBucket)
	}
	if st.slots, st.slotsNoTTLs, err = ensureSlots(ctx, js, cfg, replicas); err != nil {
		return nil, err
	}
	st.slotTTLs = st.slotsNoTTLs == ""
	if consumer {
		if st.calls, err = js.CreateOrUpdateConsumer(ctx, subjects.CallsStream, consumerConfigFor(ctx, js, cfg)); err != nil {
			return nil, fmt.Errorf("calls consumer: %w%s", err, otherConsumersHint(ctx, js, err))
		}
	}
	return &st, nil
}

// stateLost reports whether err says a stream or bucket of the executor's state is gone: the
// limits stream and the slots bucket (memory storage) do not survive a restart of a NATS
// server that is not clustered, even one that keeps its store. A read of a slot (a direct get)
// finds no responders when the bucket is gone. A slot written with its TTL refused as
// jsErrCodeMessageTTLDisabled is a slots bucket declared again without per-key TTLs (emptied
// by such a restart, then declared first by an executor of an older mcpstream): declaring the
// state again gives it them in place (see ensureSlots).
func stateLost(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, nats.ErrNoResponders) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeMessageTTLDisabled
}

// jsErrCodeMessageTTLDisabled is JetStream's refusal of a message with a TTL (Nats-TTL) on a
// stream without allow_msg_ttl ("per-message TTL is disabled"). nats.go does not name it.
const jsErrCodeMessageTTLDisabled jetstream.ErrorCode = 10166

// minClaimTTL is the least time a claim must be kept: as long as a call may stay unanswered
// (its longest call and approval wait, and the ack wait of every delivery), and at least the
// calls stream's de-duplication window, after which a resend is a new message that only its
// claim stops.
func (c Config) minClaimTTL() time.Duration {
	return max(subjects.DedupWindow, c.MaxCallTimeout+c.MaxApprovalTimeout+time.Duration(c.MaxDeliver)*c.AckWait)
}

func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if kv, err := js.KeyValue(ctx, cfg.Bucket); err == nil {
		return kv, usableBucket(ctx, kv, cfg)
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	kv, err := js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// consumerConfigFor is ConsumerConfig, keeping the MaxWaiting of a consumer that exists already:
// JetStream cannot change it (a consumer declared by an older version keeps 512: delete it while
// no call is in flight to get maxWaiting).
func consumerConfigFor(ctx context.Context, js jetstream.JetStream, cfg Config) jetstream.ConsumerConfig {
	cc := ConsumerConfig(cfg)
	if c, err := js.Consumer(ctx, subjects.CallsStream, cc.Durable); err == nil {
		cc.MaxWaiting = c.CachedInfo().Config.MaxWaiting
	}
	return cc
}

// jsErrCodeStreamInvalidConfig is JetStream's answer to a stream declaration it refuses as such:
// among others, an update of a setting it cannot change in place. nats.go does not name it.
const jsErrCodeStreamInvalidConfig jetstream.ErrorCode = 10052

// limitsStreamHint explains a declaration of the limits stream that JetStream refused because
// of what the existing stream (cur; nil when there was none) holds: no message counters (a
// nats-server before 2.12 made it, ignoring the setting; on a cluster its memory stream outlives
// a rolling upgrade) or another storage type, which JetStream cannot change in place. NATS's own
// text names neither the stream nor what to do. "" for any other error.
func limitsStreamHint(err error, cfg jetstream.StreamConfig, cur *jetstream.StreamConfig) string {
	var apiErr *jetstream.APIError
	if cur == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeStreamInvalidConfig {
		return ""
	}
	var found string
	switch {
	case cur.AllowMsgCounter != cfg.AllowMsgCounter:
		found = "without message counters (made by a nats-server before 2.12, or by hand)"
	case cur.Storage != cfg.Storage:
		found = fmt.Sprintf("with %s storage, not %s", strings.ToLower(cur.Storage.String()), strings.ToLower(cfg.Storage.String()))
	default:
		found = "with a setting that differs"
	}
	return fmt.Sprintf(" (stream %s exists %s, which JetStream cannot change on an existing stream: it holds only the "+
		"rate windows' counters, which may start over: delete it (nats stream rm %s) and start the executors again)",
		cfg.Name, found, cfg.Name)
}

// JetStream's answers when a work queue stream refuses a consumer whose subjects another one
// takes already. nats.go names neither.
const (
	jsErrCodeConsumerWQMultipleUnfiltered jetstream.ErrorCode = 10099
	jsErrCodeConsumerWQConsumerNotUnique  jetstream.ErrorCode = 10100
)

// otherConsumersHint names the consumers that keep the workers' consumer off the calls stream (a
// work queue: one consumer per subject), such as one an operator added to look at the waiting
// calls, which also takes the calls it is given away from the workers. "" for any other error.
func otherConsumersHint(ctx context.Context, js jetstream.JetStream, err error) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || (apiErr.ErrorCode != jsErrCodeConsumerWQMultipleUnfiltered && apiErr.ErrorCode != jsErrCodeConsumerWQConsumerNotUnique) {
		return ""
	}
	var others []string
	if s, err := js.Stream(ctx, subjects.CallsStream); err == nil {
		names := s.ConsumerNames(ctx)
		for n := range names.Name() {
			if n != subjects.ExecutorConsumer && len(others) < 5 {
				others = append(others, n)
			}
		}
	}
	rm := "nats consumer rm " + subjects.CallsStream + " NAME"
	what := "another consumer"
	if len(others) > 0 {
		rm = "nats consumer rm " + subjects.CallsStream + " " + others[0]
		what = "consumer " + strings.Join(others, ", ")
	}
	return fmt.Sprintf(" (%s on the work queue stream %s takes the calls' subjects, and JetStream gives each subject of a "+
		"work queue to one consumer: the executors' %s cannot be made while it is there, and the calls it takes never "+
		"reach a worker; remove it (%s) and start again; read a waiting call with `nats stream get %s SEQ`, which takes none)",
		what, subjects.CallsStream, subjects.ExecutorConsumer, rm, subjects.CallsStream)
}

// usableBucket refuses an existing bucket (its stream made by hand, or by another tool) that
// does not hold the keys mcpstream writes to it: one whose stream does not take the bucket's
// subjects answers every write "no responders", and every call needing a claim or a slot was
// refused at run time, each time taken for lost state and declared again in vain. A claims
// bucket in memory storage while cfg asks for files is refused too: its claims would not
// outlive a restart of NATS, while the calls stream's requests do, and a side-effecting call
// redelivered then would run again.
func usableBucket(ctx context.Context, kv jetstream.KeyValue, cfg jetstream.KeyValueConfig) error {
	ks, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	st, ok := ks.(*jetstream.KeyValueBucketStatus)
	if !ok || st.StreamInfo() == nil {
		return nil
	}
	info := st.StreamInfo()
	fix := fmt.Sprintf("delete it when no call is in flight (nats kv rm %s) so that it is declared again", cfg.Bucket)
	if want := "$KV." + cfg.Bucket + ".>"; !slices.Contains(info.Config.Subjects, want) {
		return fmt.Errorf("%w: bucket %s is not a key-value bucket mcpstream can use: its stream %s takes %v, not %s; %s",
			ErrConfig, cfg.Bucket, info.Config.Name, info.Config.Subjects, want, fix)
	}
	if cfg.Bucket == subjects.InflightBucket && cfg.Storage == jetstream.FileStorage && info.Config.Storage != jetstream.FileStorage {
		return fmt.Errorf("%w: bucket %s keeps its claims in %s storage, which a restart of NATS empties while the calls "+
			"stream keeps the requests: a side-effecting call redelivered then could run again; %s",
			ErrConfig, cfg.Bucket, strings.ToLower(info.Config.Storage.String()), fix)
	}
	return nil
}
