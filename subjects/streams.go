package subjects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions tunes the stream declarations; the zero value gives the defaults.
type StreamOptions struct {
	Replicas int           // 0 → 1; 3 on a cluster
	Memory   bool          // memory storage instead of file (tests, benchmarks)
	DedupWin time.Duration // 0 → DedupWindow: how long a call id or fingerprint de-duplicates
	// How long and how much of the results and audit streams is kept: 0 → 24 hours and 7 days,
	// no size bound. At the bound the oldest go first. Each stored result costs the server about
	// 210 bytes of memory on top of its storage (a subject per call id). JetStream refuses a
	// results stream whose max age is shorter than its de-duplication window (DedupWin).
	ResultsMaxAge, AuditMaxAge     time.Duration
	ResultsMaxBytes, AuditMaxBytes int64
}

// Streams returns mcpstream's JetStream streams as config values. They are applied idempotently
// with EnsureStreams.
func Streams(o StreamOptions) []jetstream.StreamConfig {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.DedupWin == 0 {
		o.DedupWin = DedupWindow
	}
	if o.ResultsMaxAge == 0 {
		o.ResultsMaxAge = 24 * time.Hour
	}
	if o.AuditMaxAge == 0 {
		o.AuditMaxAge = 7 * 24 * time.Hour
	}
	bytes := func(n int64) int64 {
		if n <= 0 {
			return -1 // unlimited
		}
		return n
	}
	storage := jetstream.FileStorage
	if o.Memory {
		storage = jetstream.MemoryStorage
	}
	return []jetstream.StreamConfig{
		{
			Name:        RegistryStream,
			Description: "mcpstream registry: server snapshots, list_changed, status and revocations (replayable)",
			Subjects:    []string{RegistryAll},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			Duplicates:  o.DedupWin,
			MaxMsgSize:  MaxEventBytes,
			Discard:     jetstream.DiscardOld,
			// Every event is kept but the confirmations of unchanged lists, which registrysync
			// stores with a per-message TTL (Nats-TTL, nats-server 2.11 or later): they only
			// restart a list's TTL, and kept for good they grew the stream, and every replay,
			// by one per list every half TTL. JetStream enables it on an existing stream, and
			// never disables it.
			AllowMsgTTL: true,
		},
		{
			Name:        CallsStream,
			Description: "mcpstream call requests: a durable work queue, de-duplicated by call id",
			Subjects:    []string{CallsAll},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			Duplicates:  o.DedupWin,
			MaxMsgSize:  MaxCallBytes,
			// At a bound an operator sets (max_msgs, max_bytes), a new call is refused, never
			// an older one dropped to make room: every request stored was acknowledged to its
			// caller, who waits for its answer. (A per-subject bound, max_msgs_per_subject,
			// needs discard_new_per_subject as well: the declaration sets it along with one.)
			Discard: jetstream.DiscardNew,
		},
		{
			Name:        ResultsStream,
			Description: "mcpstream call results: the one terminal answer of each call",
			Subjects:    []string{ResultsAll},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			MaxAge:      o.ResultsMaxAge,
			MaxBytes:    bytes(o.ResultsMaxBytes),
			MaxMsgSize:  MaxEventBytes,
			Duplicates:  o.DedupWin,
			Discard:     jetstream.DiscardOld,
		},
		{
			Name:        AuditStream,
			Description: "mcpstream audit: every request, decision and result (redacted, capped)",
			Subjects:    []string{AuditAll},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			MaxAge:      o.AuditMaxAge,
			MaxBytes:    bytes(o.AuditMaxBytes),
			MaxMsgSize:  MaxEventBytes,
			Discard:     jetstream.DiscardOld,
		},
	}
}

// DedupWindow is the default de-duplication window of the registry, calls and results streams:
// a call id sent again within it is answered from the results stream, so results are kept at
// least as long.
const DedupWindow = 10 * time.Minute

// Size limits of messages (the embedded server's max_payload is MaxEventBytes too).
const (
	MaxEventBytes = 8 << 20 // a registry snapshot or a result
	MaxCallBytes  = 4 << 20 // a call request
)

// Limits on one tool definition of a snapshot, the same for every consumer of the registry
// (the catalog and the executor), so that a hostile snapshot cannot show one definition in
// search and have another run: a definition over MaxDefinitionBytes or with a name over
// MaxToolNameBytes is skipped, and of two definitions with one name the first usable one
// counts. registrysync rejects definitions over 256 KiB and names over 512 bytes by default.
const (
	MaxDefinitionBytes = 512 << 10
	MaxToolNameBytes   = 4 << 10 // a Badger key holds the name and may not exceed 65,000 bytes
)

// MaxSnapshotItems bounds the items and rejections of one snapshot, for every producer and
// consumer of the registry: registrysync refuses a longer list (snapshot_too_large), and
// DecodeRegistry refuses a snapshot holding more (ErrBadPayload), counted before anything is
// decoded. Without it one hostile 8 MiB snapshot of millions of tiny items ("0,") took
// gigabytes and minutes in each consumer, at every replay.
const MaxSnapshotItems = 100_000

// ForeignSubjects returns the subjects of an existing stream of one of mcpstream's names that
// are not mcpstream's (outside "mcpstream."): another application's stream of the same name on
// a shared account, or subjects an operator added. Declaring the stream over them would replace
// them, and their publishes would stop being stored without a word, so a declaration refuses
// such a stream instead.
func ForeignSubjects(cur jetstream.StreamConfig) []string {
	ns, _, _ := strings.Cut(Root, ".")
	var foreign []string
	for _, s := range cur.Subjects {
		if !strings.HasPrefix(s, ns+".") {
			foreign = append(foreign, s)
		}
	}
	return foreign
}

// EnsureStreams creates or updates every stream. Safe to call from every role at start.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, o StreamOptions) error {
	for _, cfg := range Streams(o) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// WrongLastSequence reports whether a publish was refused because the subject's last sequence
// was not the one it expected (Nats-Expected-Last-Subject-Sequence): somebody else wrote first.
// mcpstream's writers that may race use it as a compare-and-set: the executor's one answer per
// call, the liveness watchdog's declarations, a stopping registrysync's last status. A clustered
// stream may report the code's "constant" variant.
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// JetStream's answers when it stores no message, for lack of room or a failing store. nats.go
// names none of them.
const (
	jsErrCodeAccountResourcesExceeded jetstream.ErrorCode = 10002 // the account's storage limit
	jsErrCodeInsufficientResources    jetstream.ErrorCode = 10023 // the server's (max_file_store, max_memory_store)
	jsErrCodeStorageResourcesExceeded jetstream.ErrorCode = 10047
	jsErrCodeStreamStoreFailed        jetstream.ErrorCode = 10077 // a stream's bound (max_msgs, max_bytes with discard new), or its store failed
)

// OutOfStorage reports whether JetStream refused to store a message because the server
// (max_file_store, max_memory_store) or the account has no storage left: a condition that
// lasts until old messages age out or an operator makes room.
func OutOfStorage(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsErrCodeAccountResourcesExceeded, jsErrCodeInsufficientResources, jsErrCodeStorageResourcesExceeded:
		return true
	}
	return false
}

// StoreRefused reports whether JetStream refused to store a message because something is
// full — a bound of the stream (or of a KV bucket), the account's or the server's storage — or
// its store failed. JetStream answered: unlike a timeout, nothing was stored, and asking again
// at once gets the same answer.
func StoreRefused(err error) bool {
	var apiErr *jetstream.APIError
	return OutOfStorage(err) || errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeStreamStoreFailed
}
