package indexer

import (
	"errors"
	"runtime"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/search"
)

// Request limits of the catalog service.
const (
	MaxQueryBytes   = 4 << 10  // a search query (too_large beyond)
	MaxRequestBytes = 64 << 10 // a request body (too_large beyond)
	DefaultK        = 10       // results of a search with k = 0
	MaxK            = 100      // largest k (bad_request beyond)
	MaxDetailNames  = 100      // names of one details request
	MaxFilterValues = 64       // servers or tags of one search request
	MaxNameBytes    = 1 << 10  // one name in a details or select request, or a servers request's after
	DefaultServers  = 100      // servers of a servers page with limit = 0
	MaxServers      = 1000     // largest servers limit (bad_request beyond)
)

// MaxRejected bounds the rejected definitions the catalog keeps per server and kind, and shows
// per server in a servers reply; the rest are counted.
const MaxRejected = 32

// maxRejectedText bounds the name and the message of a kept rejected definition (bytes).
const maxRejectedText = 200

// QueueGroup is the queue group every replica's catalog service joins.
const QueueGroup = "mcpstream-catalog"

// Tool labels: permission and risk, from the definition's annotations and the policy.
const (
	LabelReadOnly      = "read-only"
	LabelDestructive   = "destructive"
	LabelIdempotent    = "idempotent"
	LabelOpenWorld     = "open-world"
	LabelNeedsApproval = "needs-approval"
)

// Errors. Requests that fail carry the matching subjects.Code… in their reply.
var (
	ErrBadRequest = errors.New("bad request")       // subjects.CodeBadRequest
	ErrTooLarge   = errors.New("request too large") // subjects.CodeTooLarge
	ErrNotFound   = errors.New("not found")         // subjects.CodeNotFound
	ErrClosed     = errors.New("catalog closed")
	ErrStore      = errors.New("catalog store") // Badger failed
	// ErrInUse (with ErrStore): Open found the directory locked by another process (another
	// replica given the same directory; the error names its pid). Never remove a directory in
	// use.
	ErrInUse = errors.New("catalog directory in use by another process")
	// ErrUnreadable (with ErrStore): Open could not read the stored catalog (a record that does
	// not decode, a value log or a table cut short or corrupted, a MANIFEST damaged or missing).
	// The catalog holds nothing the registry stream does not:
	// remove the directory and the replica rebuilds it by replay.
	ErrUnreadable = errors.New("catalog unreadable")
	// ErrDiskFull (with ErrStore): the catalog's filesystem has less free space than a write
	// needs (see DiskReserve): Open and every write refuse, nothing is written, the catalog
	// stays as it was. Free space and start the replica again: it resumes from its sequence.
	ErrDiskFull = errors.New("not enough free disk space for the catalog")
)

// Config configures a catalog replica. The zero value is an in-memory replica with the open
// policy, except that Dir or InMemory must be set.
type Config struct {
	// Dir is the replica's Badger directory (one per replica; Badger locks it).
	Dir string
	// InMemory keeps Badger in memory (Dir must be ""): tests and evaluation.
	InMemory bool
	// Policy filters every answer; nil means policy.Open().
	Policy *policy.Policy
	// Log receives the replica's log; the zero value discards it.
	Log zerolog.Logger
	// Search tunes ranking (zero value: the search package's defaults).
	Search search.Config
	// Now is the clock of freshness (TTLs); nil means time.Now.
	Now func() time.Time
	// Workers bounds requests handled at once by Serve; 0 → 2 × GOMAXPROCS.
	Workers int
	// Stream is the registry stream's name; "" → subjects.RegistryStream.
	Stream string
	// Replica names the replica in logs and the service metadata ("" → "0").
	Replica string
	// Instance names this replica among every process's in the service metadata
	// (subjects.MetaInstance), which `mcpstream policy check` prints; "" → host:pid/Replica.
	Instance string
	// MaxRemoved bounds the removed tools remembered (so that details answer "removed" rather
	// than not_found); past it, those removed longest ago (by stream sequence) are forgotten,
	// in the same transaction, so every replica forgets the same ones; 0 → 50,000. The tools one
	// message removes are all remembered: a message that removes more than MaxRemoved tools
	// leaves that many until the next message.
	MaxRemoved int
	// Embedder, when set, makes search hybrid: every tool's text (name, title, description,
	// parameters, server description) is embedded in the background (cached in Badger by the
	// embedder's Name and the text) and each search request is embedded too; the vector ranking
	// is fused with the lexical one (search.Config.VectorWeight). Tools without a vector yet, and
	// requests whose embedding fails or takes longer than EmbedTimeout, are served lexically.
	Embedder Embedder
	// EmbedTimeout bounds the embedding of one search request; 0 → 2s.
	EmbedTimeout time.Duration
	// GCInterval is the period of the value log's garbage collection while Follow runs (on
	// disk: the space of overwritten and deleted definitions and vectors is reclaimed; see the
	// package doc); 0 → DefaultGCInterval (5 minutes), < 0: never.
	GCInterval time.Duration
}

// DefaultMaxRemoved is the default of Config.MaxRemoved. staleness.MaxRemembered, the removed
// tool names a freshness view (the executor's) remembers a server, is equal to it.
const DefaultMaxRemoved = 50_000

// Stats are a replica's counters.
type Stats struct {
	Seq uint64 // last applied stream sequence
	// StreamLast is the registry stream's last sequence as the replica last saw it: from each
	// message it takes (its sequence plus the messages pending after it) and from the stream's
	// info, read every 5 s while it follows (0 before it follows).
	StreamLast uint64
	// Lag is how many messages of the stream up to StreamLast the replica has not applied yet:
	// StreamLast − Seq, less the messages up to the stream's last sequence when it started
	// following that were deleted before it read them (confirmations whose TTL ran out while
	// it was stopped), known once it took everything after its position. It grows when the
	// replica falls behind or is stuck.
	Lag        uint64
	Applied    uint64 // messages applied since Open
	BadEvents  uint64 // malformed messages skipped since Open
	Collisions uint64 // public names refused because another pair holds them, since Open
	BadItems   uint64 // definitions without a usable name, or duplicated, skipped since Open
	Tools      int    // tools in the catalog
	Servers    int    // servers the registry announced (not removed)

	Vectors        int    // tools with a vector (hybrid search)
	VectorsPending int    // tools waiting for one
	EmbedErrors    uint64 // failed embedder calls since Open (tools in batches, and requests)
	BadVectors     uint64 // vectors the index refused (zero, non-finite, another dimension)

	// ValueLogBytes is the size of the Badger value log files now (0 in memory); the active
	// file counts at its preallocated size (twice the 64 MiB of a file).
	ValueLogBytes int64
	// ValueLogRewrites counts the value log files the garbage collection rewrote since Open
	// (their live values moved to the active file, the file then deleted).
	ValueLogRewrites uint64

	// Endpoints counts the catalog service's requests by endpoint: search, details, servers.
	Endpoints map[string]EndpointStats
}

// EndpointStats counts the requests one catalog endpoint answered since Open.
type EndpointStats struct {
	Requests uint64  // answered
	Errors   uint64  // answered with an error (its code in the reply)
	Seconds  float64 // total time from taking a request to its reply being ready to send
}

// workers is Workers or its default, 2 × GOMAXPROCS.
func (c Config) workers() int {
	if c.Workers > 0 {
		return c.Workers
	}
	return 2 * runtime.GOMAXPROCS(0)
}
