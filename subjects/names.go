package subjects

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Root is the prefix of every mcpstream subject; "v1" is the API version.
const Root = "mcpstream.v1"

// Stream names.
const (
	RegistryStream = "MCPSTREAM_REGISTRY"
	CallsStream    = "MCPSTREAM_CALLS"
	ResultsStream  = "MCPSTREAM_RESULTS"
	AuditStream    = "MCPSTREAM_AUDIT"
)

// Stream subject filters, one per stream.
const (
	RegistryAll = Root + ".registry.>"
	CallsAll    = Root + ".calls.>"
	ResultsAll  = Root + ".results.>"
	AuditAll    = Root + ".audit.>"
)

// Catalog service (request/reply, served by indexer replicas in a queue group). The tenant is a
// token of the subject, as for calls, so NATS permissions can pin each tenant to its own
// catalog: a request's principal is resolved within the subject's tenant.
const (
	CatalogService    = "mcpstream-catalog"
	CatalogSearchAll  = Root + ".catalog.*.search"
	CatalogDetailsAll = Root + ".catalog.*.details"
	CatalogServersAll = Root + ".catalog.*.servers"
)

// CatalogSearch is the subject of tenant's search requests (search_tools).
func CatalogSearch(tenant string) string { return catalog(tenant, "search") }

// CatalogDetails is the subject of tenant's details requests (get_tool_details).
func CatalogDetails(tenant string) string { return catalog(tenant, "details") }

// CatalogServers is the subject of tenant's server-list requests.
func CatalogServers(tenant string) string { return catalog(tenant, "servers") }

func catalog(tenant, op string) string { return Root + ".catalog." + EncodeToken(tenant) + "." + op }

// Kind is a kind of MCP list: tools, prompts or resources.
type Kind string

// The kinds a server lists.
const (
	KindTools     Kind = "tools"
	KindPrompts   Kind = "prompts"
	KindResources Kind = "resources"
)

// Kinds lists every kind in a stable order.
var Kinds = []Kind{KindTools, KindPrompts, KindResources}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	return k == KindTools || k == KindPrompts || k == KindResources
}

// Errors returned when parsing subjects or names.
var (
	ErrBadSubject = errors.New("not an mcpstream subject")
	ErrBadToken   = errors.New("bad subject token")
	// ErrSubjectTokens (with ErrBadSubject) is a subject with more or fewer tokens than its
	// kind has (calls.<tenant>.x): not one of the documented subjects.
	ErrSubjectTokens = errors.New("wrong number of subject tokens")
)

// RegistrySnapshot is the subject of a server's snapshot of one kind.
func RegistrySnapshot(server string, kind Kind) string {
	return Root + ".registry." + EncodeToken(server) + ".snapshot." + string(kind)
}

// RegistryChanged is the subject of a server's list_changed notification of one kind.
func RegistryChanged(server string, kind Kind) string {
	return Root + ".registry." + EncodeToken(server) + ".changed." + string(kind)
}

// RegistryConfirmed is the subject of the confirmations that a server's list of one kind was
// re-listed unchanged (Confirmed).
func RegistryConfirmed(server string, kind Kind) string {
	return Root + ".registry." + EncodeToken(server) + ".confirmed." + string(kind)
}

// RegistryStatus is the subject of a server's status events.
func RegistryStatus(server string) string {
	return Root + ".registry." + EncodeToken(server) + ".status"
}

// RegistryRevoked is the subject of operator revocations of a server's tools.
func RegistryRevoked(server string) string {
	return Root + ".registry." + EncodeToken(server) + ".revoked"
}

// RegistryServer is the filter of every registry subject of one server.
func RegistryServer(server string) string {
	return Root + ".registry." + EncodeToken(server) + ".>"
}

// Filters over every server.
const (
	RegistryAllStatus    = Root + ".registry.*.status"
	RegistryAllSnapshots = Root + ".registry.*.snapshot.*"
)

// RegistrySubject is a parsed registry subject.
type RegistrySubject struct {
	Server string // decoded server name
	Event  string // "snapshot", "changed", "confirmed", "status" or "revoked"
	Kind   Kind   // for snapshot, changed and confirmed
}

// ParseRegistry parses a registry subject.
func ParseRegistry(subject string) (RegistrySubject, error) {
	rest, ok := strings.CutPrefix(subject, Root+".registry.")
	if !ok {
		return RegistrySubject{}, fmt.Errorf("%w: %q", ErrBadSubject, subject)
	}
	parts := strings.Split(rest, ".")
	server, err := DecodeToken(parts[0])
	if err != nil {
		return RegistrySubject{}, fmt.Errorf("%w: %q: %w", ErrBadSubject, subject, err)
	}
	out := RegistrySubject{Server: server}
	switch {
	case len(parts) == 3 && (parts[1] == EventSnapshot || parts[1] == EventChanged || parts[1] == EventConfirmed):
		out.Event, out.Kind = parts[1], Kind(parts[2])
		if !out.Kind.Valid() {
			return RegistrySubject{}, fmt.Errorf("%w: %q: unknown kind %q", ErrBadSubject, subject, parts[2])
		}
	case len(parts) == 2 && (parts[1] == EventStatus || parts[1] == EventRevoked):
		out.Event = parts[1]
	default:
		return RegistrySubject{}, fmt.Errorf("%w: %q", ErrBadSubject, subject)
	}
	return out, nil
}

// Calls is the durable work-queue subject a caller publishes a CallRequest to.
func Calls(tenant string) string { return Root + ".calls." + EncodeToken(tenant) }

// Exec is the request/reply subject: the executor persists the request to Calls and answers with
// the terminal CallResult.
func Exec(tenant string) string { return Root + ".exec." + EncodeToken(tenant) }

// ExecAll is the filter the executor front end subscribes to.
const ExecAll = Root + ".exec.*"

// Result is the subject of a call's terminal answer (stored in the results stream).
func Result(tenant, callID string) string {
	return Root + ".results." + EncodeToken(tenant) + "." + EncodeToken(callID)
}

// Audit is the subject of an audit event.
func Audit(tenant, event string) string {
	return Root + ".audit." + EncodeToken(tenant) + "." + EncodeToken(event)
}

// NoTenantToken is the tenant token of the audit events of a call message whose subject holds
// no valid tenant token: "~~", which EncodeToken never produces, so no tenant's events mix with
// them.
const NoTenantToken = "~~"

// AuditNoTenant is the subject of an audit event of a call message published on a subject with
// no valid tenant token (the event's message names that subject).
func AuditNoTenant(event string) string {
	return Root + ".audit." + NoTenantToken + "." + EncodeToken(event)
}

// Approvals is the request/reply subject that approves or denies a call waiting in needs_approval.
// The tenant is a token so NATS permissions can pin who may approve which tenant's calls.
func Approvals(tenant, callID string) string {
	return Root + ".approvals." + EncodeToken(tenant) + "." + EncodeToken(callID)
}

// ApprovalAll is the filter of every approval subject.
const ApprovalAll = Root + ".approvals.*.*"

// Relist is the request/reply subject that asks a server's connector to re-list now.
func Relist(server string) string { return Root + ".control.relist." + EncodeToken(server) }

// Dispatch is the request/reply subject on which a server's connector executes tools/call.
func Dispatch(server string) string { return Root + ".dispatch." + EncodeToken(server) }

// HeartbeatSubject is the core NATS subject of a registrysync process's heartbeats.
func HeartbeatSubject(connector string) string { return Root + ".heartbeat." + EncodeToken(connector) }

// HeartbeatAll is the filter of every heartbeat subject.
const HeartbeatAll = Root + ".heartbeat.*"

// Filters for the connector's request/reply endpoints.
const (
	RelistAll   = Root + ".control.relist.*"
	DispatchAll = Root + ".dispatch.*"
)

// tenantKinds are the subject kinds TenantOf reads, each with how many tokens follow its
// prefix: the tenant, then the call id (results), the event (audit) or the operation (catalog).
var tenantKinds = []struct {
	prefix string
	tokens int
}{{".calls.", 1}, {".exec.", 1}, {".results.", 2}, {".audit.", 2}, {".catalog.", 2}}

// TenantOf returns the decoded tenant token of a calls, exec, results, audit or catalog subject.
// The subject must have exactly its kind's tokens (ErrSubjectTokens otherwise): the calls stream
// captures calls.>, and a call published on calls.<tenant>.x is none of the tenant's — not the
// subject NATS permissions pin a tenant to, nor the one the executor's checks of a call's
// subject (a resend, another tenant's Nats-Msg-Id) compare with — so it must not run as one.
// A tenant longer than MaxUserBytes (what principal.tenant may hold) is refused: the subjects
// and keys built from a tenant (results with the call id, claims, rate counters, slots) must stay
// within what a NATS control line holds (4 KiB by default), or the server closes the connection
// that publishes one. The empty tenant ("~") is refused too: it is no tenant (a principal
// without one is the local tenant's), so no principal could ever act in it.
func TenantOf(subject string) (string, error) {
	for _, k := range tenantKinds {
		rest, ok := strings.CutPrefix(subject, Root+k.prefix)
		if !ok {
			continue
		}
		if n := strings.Count(rest, ".") + 1; n != k.tokens {
			return "", fmt.Errorf("%w: %s: %w: %d after %s, want %d (%s)", ErrBadSubject, quoteCut(subject, 300), ErrSubjectTokens,
				n, Root+strings.TrimSuffix(k.prefix, "."), k.tokens, tenantShape(k.prefix))
		}
		tok, _, _ := strings.Cut(rest, ".")
		t, err := DecodeToken(tok)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrBadSubject, quoteCut(subject, 300), err)
		}
		if len(t) > MaxUserBytes {
			return "", fmt.Errorf("%w: %s: the tenant is %d bytes long; at most %d", ErrBadSubject, quoteCut(subject, 300), len(t), MaxUserBytes)
		}
		if t == "" {
			return "", fmt.Errorf("%w: %s: the tenant is empty", ErrBadSubject, quoteCut(subject, 300))
		}
		return t, nil
	}
	return "", fmt.Errorf("%w: %q", ErrBadSubject, subject)
}

// TenantRefusal is the bad_request that the executor and the catalog answer to a request on
// subject (a calls, exec, results, audit or catalog subject) whose tenant token TenantOf refuses,
// saying why; nil when TenantOf reads a tenant there. Clients that refuse such a request before
// sending it (subjects.CheckTenant) answer it with the same words.
func TenantRefusal(subject string) *Error {
	if _, err := TenantOf(subject); err != nil {
		return &Error{Code: CodeBadRequest, Message: "bad tenant token in subject " + strings.TrimPrefix(err.Error(), ErrBadSubject.Error()+": ")}
	}
	return nil
}

// tenantShape is the documented shape of the subjects of a TenantOf kind.
func tenantShape(prefix string) string {
	switch prefix {
	case ".results.":
		return Root + prefix + "<tenant>.<callID>"
	case ".audit.":
		return Root + prefix + "<tenant>.<event>"
	case ".catalog.":
		return Root + prefix + "<tenant>.<op>"
	}
	return Root + prefix + "<tenant>"
}

// quoteCut is s quoted as %q quotes it, cut to its first n runes with "…" inside the quotes
// where it was cut (%.300q put nothing there): text that redacts a caller's words from an error
// (redact.Values.StringCut) sees the cut, and the start of a secret value that straddled it.
func quoteCut(s string, n int) string {
	runes := 0
	for i := range s {
		if runes == n {
			return strconv.Quote(s[:i] + "…")
		}
		runes++
	}
	return strconv.Quote(s)
}

// LastToken returns the decoded last token of a subject (the server of relist and dispatch
// subjects, the call id of approval subjects).
func LastToken(subject string) (string, error) {
	i := strings.LastIndexByte(subject, '.')
	return DecodeToken(subject[i+1:])
}

// Answerable reports whether a service of mcpstream may publish its answer to reply, the reply
// subject of a request it serves. NATS checks a publisher's permissions on the subject it
// publishes to, never on the reply subject it names, and a service answers with its own
// permissions, which reach every tenant's subjects: a client allowed only on one tenant's
// subjects could otherwise name mcpstream's own subjects as its reply (another tenant's calls
// subject, where the answer would run as that tenant's call, or its results) or the server's
// "$" subjects (a KV bucket's, where it would hold another tenant's concurrency slots or claim
// its call ids; the JetStream API) and have the service write there for it. A request with such
// a reply subject is not served (clients reply to inboxes, "_INBOX." by default). "" is not
// answerable either (nobody to answer).
func Answerable(reply string) bool {
	ns, _, _ := strings.Cut(Root, ".")
	return reply != "" && !strings.HasPrefix(reply, "$") && reply != ns && !strings.HasPrefix(reply, ns+".")
}
