package subjects

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/jsonscan"
)

// Version is the payload version every event carries in "v".
const Version = 1

// Event names: the "type" of registry payloads and the event token of registry subjects.
const (
	EventSnapshot = "snapshot"
	EventChanged  = "changed"
	EventStatus   = "status"
	EventRevoked  = "revoked"
	// EventConfirmed is an unchanged re-list of a list with a ttlMs (see Confirmed).
	EventConfirmed = "confirmed"
)

// Server states carried by Status events.
const (
	StatusConnecting  = "connecting"
	StatusReady       = "ready"
	StatusUnavailable = "unavailable"
	StatusRemoved     = "removed"
)

// Cache scopes from MCP 2026-07-28 list results.
const (
	ScopePublic  = "public"
	ScopePrivate = "private"
)

// Header names mcpstream sets on messages.
const (
	// HeaderMsgID is JetStream's de-duplication header; registry snapshots carry their
	// fingerprint, call requests their call id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderEventType repeats the payload's "type" for consumers that filter on headers.
	HeaderEventType = "Mcpstream-Event"
	// HeaderReplyTo on a call request (subjects.Calls) names a core NATS subject the executor
	// also publishes the terminal CallResult to, once it is stored on the results stream: the
	// exec front end sets it to the caller's reply inbox, so the answer goes straight back to the
	// caller. Only subjects under the executor's reply prefixes (default "_INBOX.") are used;
	// any other value is ignored (the answer is still on the results stream).
	HeaderReplyTo = "Mcpstream-Reply-To"
	// HeaderCallSeq is set on a result: the calls stream sequence of the request whose worker
	// published it, so that a front end relaying the answer of one request tells it from the
	// answer of another request of the same call id (a resend once the de-duplication window is
	// past), which is this one's only as a duplicate.
	HeaderCallSeq = "Mcpstream-Call-Seq"
)

// NormalScope is a snapshot's cacheScope as its consumers read it: "" (absent: public, MCP's
// default), "public" in any case is "public", and any other word is "private" ("Private", one
// no consumer knows). Consumers tell a private list by the exact word "private" (policy's
// MayUseScope): read as it was, an odd scope from a publisher other than registrysync (which
// writes only these) showed a private list to every principal. A list whose scope cannot be
// read is not shown to every principal; registrysync reads a server's cacheScope so too.
func NormalScope(scope string) string {
	switch {
	case scope == "":
		return ""
	case strings.EqualFold(scope, ScopePublic):
		return ScopePublic
	}
	return ScopePrivate
}

// ErrBadPayload is returned when an event's JSON is malformed or of an unknown version.
var ErrBadPayload = errors.New("bad event payload")

// Snapshot is the complete list of one kind (tools, prompts or resources) of one server, as
// listed across every page. Items hold each definition's raw JSON exactly as the server sent it.
// A snapshot replaces the previous one of the same server and kind: an item absent from it was
// removed.
type Snapshot struct {
	V           int               `json:"v"`
	Type        string            `json:"type"` // "snapshot"
	Server      string            `json:"server"`
	Kind        Kind              `json:"kind"`
	Fingerprint string            `json:"fingerprint"` // sha256 of the items, scope, auth context, ttlMs, rejections (hex); in the Nats-Msg-Id
	ListedAt    time.Time         `json:"listedAt"`
	Pages       int               `json:"pages"`
	TTLMs       *int64            `json:"ttlMs,omitempty"`      // smallest ttlMs over the pages; absent = not sent
	CacheScope  string            `json:"cacheScope,omitempty"` // "private" if any page was private
	AuthContext string            `json:"authContext,omitempty"`
	Items       []json.RawMessage `json:"items"`
	Rejected    []Rejected        `json:"rejected,omitempty"`
	Info        *ServerInfo       `json:"serverInfo,omitempty"`
}

// ServerInfo describes the server a snapshot came from. Name and Version are the server's
// words, redacted of its secrets, each cut to 256 bytes when longer ("…" appended).
type ServerInfo struct {
	Description string `json:"description,omitempty"` // from the configuration
	Transport   string `json:"transport,omitempty"`   // stdio | http | sse
	Protocol    string `json:"protocol,omitempty"`    // negotiated MCP protocol version
	Name        string `json:"name,omitempty"`        // serverInfo.name the server reported
	Version     string `json:"version,omitempty"`     // serverInfo.version the server reported
}

// Rejected is a definition the connector refused to publish, with a stable code.
type Rejected struct {
	Name    string `json:"name,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Codes of Snapshot.Rejected (the first four, and CodeSecretInName: one definition left out)
// and of Status (the others: the server, or its list, failed).
const (
	CodeDefinitionTooLarge = "definition_too_large"
	CodeInvalidDefinition  = "invalid_definition"
	CodeInvalidSchema      = "invalid_schema"
	CodeDuplicateName      = "duplicate_name"
	CodeTooManyPages       = "too_many_pages"
	CodeSnapshotTooLarge   = "snapshot_too_large"
	CodeMalformedResponse  = "malformed_response"
	CodeConnectFailed      = "connect_failed"
	CodeListFailed         = "list_failed"
	CodeConnectionLost     = "connection_lost"
	CodeConnectorStopped   = "connector_stopped" // the registrysync that ran the server stopped
	CodeConnectorLost      = "connector_lost"    // it fell silent: no heartbeat (killed, cut off)
)

// Codes of rejected definitions added since.
const (
	// CodeSecretInName: the definition's name (a resource's uri) holds a configured secret
	// value; its Name is published redacted. Such definitions were invalid_definition before.
	CodeSecretInName = "secret_in_name"
	// CodeNameCollision is the catalog's own (subjects.RejectedDefinition): it refused a tool
	// whose public name (server__tool) another tool holds already.
	CodeNameCollision = "name_collision"
)

// ListChanged records a notifications/<kind>/list_changed from a server. Consumers mark the
// server's cached list of that kind stale at once, and remember the stream sequence of the
// event: a new Snapshot after it, or a Confirmed whose AfterSeq is at least that sequence,
// makes the list fresh again (see Confirmed).
type ListChanged struct {
	V      int       `json:"v"`
	Type   string    `json:"type"` // "changed"
	Server string    `json:"server"`
	Kind   Kind      `json:"kind"`
	At     time.Time `json:"at"`
}

// Confirmed records that a re-list at ListedAt found a server's list of one kind unchanged: the
// list with Fingerprint, whose snapshot is on the stream already. It restarts the list's ttlMs
// without a new snapshot (registrysync de-duplicates those): consumers set the list's listedAt
// to ListedAt when they hold that fingerprint and ListedAt is not older than what they hold, and
// ignore it otherwise (another list, whose snapshot is on its way or came since).
//
// AfterSeq (absent: 0) is the registry stream sequence of the latest ListChanged of that
// server and kind that was stored before the re-list began: the re-list answers that
// notification and every earlier one. A consumer whose list a ListChanged made stale makes it
// fresh again on a Confirmed that names the fingerprint it holds and whose AfterSeq is at least
// the sequence of the ListChanged it holds the list stale for (the latest it applied); a lower
// AfterSeq is a re-list that may predate the change, and changes nothing of the staleness. A
// Confirmed without AfterSeq never lifts a ListChanged (only a later snapshot does). A consumer
// that does not know the stream sequence of the ListChanged it applied (RegistryEvent.Seq 0)
// never lifts it with a confirmation either.
//
// registrysync publishes one for an unchanged re-list that answers a ListChanged (instead of a
// copy of the snapshot: one per ListChanged), and otherwise only for a list that has a ttlMs
// (without one nothing expires), at most once per half that TTL (and at most once a second)
// per list, so that frequent re-lists do not flood the registry stream. Those are stored with a
// per-message TTL (Nats-TTL) of twice the ttlMs, at least an hour: the stream drops them once
// the list they confirmed would be out of date anyway unless a later event confirmed or replaced
// it, so a replay ends in the same freshness. The ones that answer a ListChanged are kept.
type Confirmed struct {
	V           int       `json:"v"`
	Type        string    `json:"type"` // "confirmed"
	Server      string    `json:"server"`
	Kind        Kind      `json:"kind"`
	Fingerprint string    `json:"fingerprint"` // the Snapshot's fingerprint
	ListedAt    time.Time `json:"listedAt"`
	AfterSeq    uint64    `json:"afterSeq,omitempty"` // the ListChanged (stream sequence) the re-list answers
}

// Status is a server's connection state. Connector is the registrysync process (an id it draws
// at start) that runs the server, or in a connector_lost status the one that fell silent; while
// it runs the server it sends a Heartbeat at least every HeartbeatMs (absent: nobody watches for
// its silence).
type Status struct {
	V           int       `json:"v"`
	Type        string    `json:"type"` // "status"
	Server      string    `json:"server"`
	Status      string    `json:"status"` // connecting | ready | unavailable | removed
	Code        string    `json:"code,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Attempt     int       `json:"attempt,omitempty"`
	RetryInMs   int64     `json:"retryInMs,omitempty"`
	Description string    `json:"description,omitempty"`
	Transport   string    `json:"transport,omitempty"`
	Protocol    string    `json:"protocol,omitempty"`
	Connector   string    `json:"connector,omitempty"`
	HeartbeatMs int64     `json:"heartbeatMs,omitempty"`
	At          time.Time `json:"at"`
}

// Heartbeat is what a registrysync process sends on HeartbeatSubject(connector), core NATS (not
// stored), every EveryMs while it runs: a watchdog declares the servers of a connector silent
// for MissedHeartbeats periods unavailable (connector_lost).
type Heartbeat struct {
	V         int       `json:"v"`
	Type      string    `json:"type"` // "heartbeat"
	Connector string    `json:"connector"`
	EveryMs   int64     `json:"everyMs"`
	At        time.Time `json:"at"`
}

// EventHeartbeat is the type of Heartbeat payloads.
const EventHeartbeat = "heartbeat"

// MissedHeartbeats is how many heartbeat periods of silence make a connector lost.
const MissedHeartbeats = 3

// MinHeartbeat and MaxHeartbeat bound a heartbeat period: a watchdog watches a status claiming
// a shorter or longer one as if it said the bound, and a registrysync process beats within
// them (a period it beat past MaxHeartbeat, watched as MaxHeartbeat, would have it declared lost
// while it runs).
const (
	MinHeartbeat = 50 * time.Millisecond
	MaxHeartbeat = time.Hour
)

// Revocation lists original tool names an operator revoked on a server; "*" revokes every tool.
// A revoked tool never executes again until a later Revocation with Restore lists it.
type Revocation struct {
	V       int       `json:"v"`
	Type    string    `json:"type"` // "revoked"
	Server  string    `json:"server"`
	Tools   []string  `json:"tools,omitempty"`
	Restore []string  `json:"restore,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// MaxRevokedTools bounds the tools revoked by name on one server. A revocation that would take
// a server past it revokes every tool of the server instead (fail closed); restore ["*"] undoes
// that.
const MaxRevokedTools = 10_000

// Apply applies r to a server's tools revoked by name (named, changed in place) and its
// every-tool flag (all), and returns the new flag: the one way the catalog and the executor
// read revocations. Tools first, then restore; "*" is every tool. A name longer than
// MaxToolNameBytes names no tool and is ignored.
func (r *Revocation) Apply(named map[string]struct{}, all bool) bool {
	for _, t := range r.Tools {
		switch {
		case t == "*":
			all = true
		case len(t) > MaxToolNameBytes:
		default:
			if _, ok := named[t]; !ok && len(named) >= MaxRevokedTools {
				all = true
				continue
			}
			named[t] = struct{}{}
		}
	}
	for _, t := range r.Restore {
		if t == "*" {
			all = false
			clear(named)
			continue
		}
		delete(named, t)
	}
	return all
}

// RegistryEvent is any one registry payload, decoded by its "type".
type RegistryEvent struct {
	Snapshot    *Snapshot
	ListChanged *ListChanged
	Status      *Status
	Revocation  *Revocation
	Confirmed   *Confirmed
	// Seq is the registry stream sequence of the message, set by the consumer that read it
	// (DecodeRegistry and DecodeRegistryMsg leave it 0: unknown). Consumers need it for a
	// ListChanged: a Confirmed lifts it only by naming a sequence at least its own.
	Seq uint64
}

// DecodeRegistry decodes a registry payload and checks its version, type and server. A member
// named twice, or matching a field only up to case, is refused as in requests (see Decode).
func DecodeRegistry(data []byte) (RegistryEvent, error) {
	var head struct {
		V      int    `json:"v"`
		Type   string `json:"type"`
		Server string `json:"server"`
	}
	// (unmarshal: an integer written 1.0 or 1e0, as a script may publish a revocation, is that
	// integer, here and in the event's other integer fields.)
	if _, err := unmarshal(data, &head); err != nil {
		return RegistryEvent{}, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	if head.V != Version {
		return RegistryEvent{}, fmt.Errorf("%w: version %d, want %d", ErrBadPayload, head.V, Version)
	}
	if head.Server == "" {
		return RegistryEvent{}, fmt.Errorf("%w: no server", ErrBadPayload)
	}
	var ev RegistryEvent
	var target any
	switch head.Type {
	case EventSnapshot:
		if n := snapshotEntries(data); n > MaxSnapshotItems {
			return RegistryEvent{}, fmt.Errorf("%w: a snapshot of %d items and rejections, more than %d", ErrBadPayload, n, MaxSnapshotItems)
		}
		ev.Snapshot = &Snapshot{}
		target = ev.Snapshot
	case EventChanged:
		ev.ListChanged = &ListChanged{}
		target = ev.ListChanged
	case EventStatus:
		ev.Status = &Status{}
		target = ev.Status
	case EventRevoked:
		ev.Revocation = &Revocation{}
		target = ev.Revocation
	case EventConfirmed:
		ev.Confirmed = &Confirmed{}
		target = ev.Confirmed
	default:
		return RegistryEvent{}, fmt.Errorf("%w: unknown type %q", ErrBadPayload, head.Type)
	}
	// As in requests (Decode): a member named twice, or one matching a field only up to case,
	// is malformed. encoding/json takes the last one of any case, a case-sensitive reader of the
	// stream the one spelled exactly: {"server":"other","Server":"kb"} on kb's subject would
	// pass here as kb's while its "server" is another's. (data is valid JSON: head decoded it.)
	if err := checkMembers(data, reflect.TypeOf(target).Elem(), ""); err != nil {
		return RegistryEvent{}, fmt.Errorf("%w: %s: %w", ErrBadPayload, head.Type, err)
	}
	if _, err := unmarshal(data, target); err != nil {
		return RegistryEvent{}, fmt.Errorf("%w: %s: %w", ErrBadPayload, head.Type, err)
	}
	if ev.Snapshot != nil && !ev.Snapshot.Kind.Valid() || ev.ListChanged != nil && !ev.ListChanged.Kind.Valid() ||
		ev.Confirmed != nil && !ev.Confirmed.Kind.Valid() {
		return RegistryEvent{}, fmt.Errorf("%w: unknown kind", ErrBadPayload)
	}
	if ev.Snapshot != nil {
		ev.Snapshot.CacheScope = NormalScope(ev.Snapshot.CacheScope)
	}
	if ev.Confirmed != nil && (ev.Confirmed.Fingerprint == "" || ev.Confirmed.ListedAt.IsZero()) {
		// It would confirm a list without a fingerprint, or at no time.
		return RegistryEvent{}, fmt.Errorf("%w: confirmed event without a fingerprint or a listedAt", ErrBadPayload)
	}
	if ev.Status != nil && ev.Status.Status == "" {
		// Consumers read an empty status as "none seen yet" (listed, so usable): an event
		// must say one. A status they do not know is read as not ready.
		return RegistryEvent{}, fmt.Errorf("%w: status event without a status", ErrBadPayload)
	}
	return ev, nil
}

// snapshotEntries counts the elements of the "items" and "rejected" arrays of the snapshot
// JSON text data (valid JSON), from its bytes: every member encoding/json could decode into
// them counts (the names up to case, each time a name repeats).
func snapshotEntries(data []byte) int {
	n := 0
	jsonscan.Members(data, func(raw, value []byte) {
		name, ok := jsonscan.Name(raw)
		if !ok || !strings.EqualFold(name, "items") && !strings.EqualFold(name, "rejected") {
			return
		}
		jsonscan.Elements(value, func([]byte) { n++ })
	})
	return n
}

// DecodeRegistryMsg decodes a registry message and checks that its payload matches its subject:
// the same server, event and kind. A payload naming another server than its subject is refused
// (ErrBadPayload), so NATS permissions that pin a publisher to some servers' subjects pin what
// it can say; every consumer of the registry stream decodes its messages with it.
func DecodeRegistryMsg(subject string, data []byte) (RegistryEvent, error) {
	rs, err := ParseRegistry(subject)
	if err != nil {
		return RegistryEvent{}, err
	}
	ev, err := DecodeRegistry(data)
	if err != nil {
		return RegistryEvent{}, err
	}
	var server, event string
	var kind Kind
	switch {
	case ev.Snapshot != nil:
		server, event, kind = ev.Snapshot.Server, EventSnapshot, ev.Snapshot.Kind
	case ev.ListChanged != nil:
		server, event, kind = ev.ListChanged.Server, EventChanged, ev.ListChanged.Kind
	case ev.Status != nil:
		server, event = ev.Status.Server, EventStatus
	case ev.Revocation != nil:
		server, event = ev.Revocation.Server, EventRevoked
	case ev.Confirmed != nil:
		server, event, kind = ev.Confirmed.Server, EventConfirmed, ev.Confirmed.Kind
	}
	if server != rs.Server || event != rs.Event || kind != rs.Kind {
		// The server is the payload's, from whoever published it: quoted and bounded, as it
		// reaches logs and terminals (mcpstream events).
		what := event
		if kind != "" {
			what += " " + string(kind)
		}
		return RegistryEvent{}, fmt.Errorf("%w: a %s event of server %q does not match subject %q",
			ErrBadPayload, what, truncateName(server), subject)
	}
	return ev, nil
}
