package executor

import (
	"context"
	"errors"
	"fmt"
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

// SlotsConfig is the KV bucket of concurrency slots; the TTL is the lease.
func SlotsConfig(lease time.Duration, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.SlotsBucket,
		Description: "mcpstream executor concurrency slots (leases)",
		History:     1,
		TTL:         lease,
		Storage:     jetstream.MemoryStorage,
		Replicas:    max(replicas, 1),
	}
}

// maxWaiting is the calls consumer's MaxWaiting: how many pull requests may wait on it, one per
// executor worker.
const maxWaiting = 4096

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
}

// EnsureState declares, idempotently, what the executor needs besides subjects.Streams: the
// limits counter stream, the claims and slots buckets and the workers' consumer. An existing
// stream or bucket keeps its replica count.
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
	lcfg := LimitsStreamConfig(cfg.Limits, replicas)
	if s, err := js.Stream(ctx, lcfg.Name); err == nil {
		lcfg.Replicas = s.CachedInfo().Config.Replicas
		if old := s.CachedInfo().Config.MaxAge; old > lcfg.MaxAge {
			lcfg.MaxAge = old // another process has longer windows
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("limits stream: %w", err)
	}
	if st.limits, err = js.CreateOrUpdateStream(ctx, lcfg); err != nil {
		return nil, fmt.Errorf("limits stream: %w", err)
	}
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
	if st.slots, err = ensureKV(ctx, js, SlotsConfig(cfg.SlotLease, replicas)); err != nil {
		return nil, err
	}
	if consumer {
		if st.calls, err = js.CreateOrUpdateConsumer(ctx, subjects.CallsStream, consumerConfigFor(ctx, js, cfg)); err != nil {
			return nil, fmt.Errorf("calls consumer: %w", err)
		}
	}
	return &st, nil
}

// stateLost reports whether err says a stream or bucket of the executor's state is gone: the
// limits stream and the slots bucket (memory storage) do not survive a restart of a NATS
// server that is not clustered, even one that keeps its store. A read of a slot (a direct get)
// finds no responders when the bucket is gone.
func stateLost(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, nats.ErrNoResponders)
}

// minClaimTTL is the least time a claim must be kept: as long as a call may stay unanswered
// (its longest call and approval wait, and the ack wait of every delivery), and at least the
// calls stream's de-duplication window, after which a resend is a new message that only its
// claim stops.
func (c Config) minClaimTTL() time.Duration {
	return max(subjects.DedupWindow, c.MaxCallTimeout+c.MaxApprovalTimeout+time.Duration(c.MaxDeliver)*c.AckWait)
}

func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if kv, err := js.KeyValue(ctx, cfg.Bucket); err == nil {
		return kv, nil
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
