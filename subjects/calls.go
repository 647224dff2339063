package subjects

import (
	"encoding/json"
	"fmt"
	"time"
)

// Principal is who a request acts for. The tenant of a call comes from its subject, never from
// the payload, so NATS permissions can pin a tenant to its own subjects.
type Principal struct {
	Tenant string   `json:"tenant,omitempty"`
	User   string   `json:"user"`
	Roles  []string `json:"roles,omitempty"`
}

// Limits of a principal: what a user name or role list of any real identity system fits in.
// A request past them is refused with bad_request, so that megabytes of principal never reach
// a policy lookup, an answer or an audit event.
const (
	MaxUserBytes = 1024
	MaxRoles     = 64
	MaxRoleBytes = 256
	// MaxCallIDBytes is the longest call id the executor takes (CallRequest.ID): a longer
	// one is refused bad_request, with no results subject to store the answer on.
	MaxCallIDBytes = 256
)

// MaxInboxPrefix is the longest reply inbox prefix (--nats-inbox) a connection of mcpstream may
// use. A request's control line carries its subject and its reply subject (the prefix, '.', a
// 22-byte NUID, '.', an 8-byte token), and the NATS server closes a connection that sends a line
// over its max_control_line (4 KiB by default), every request in flight on it cut — again at each
// redelivery of the message that led to it. The longest request subject mcpstream builds is the
// executor's direct get of an approval record in its KV bucket ($JS.API.DIRECT.GET.KV_...,
// 3,935 bytes with a tenant of MaxUserBytes and a call id of 256 bytes, each byte escaped to
// three, and a 20-digit sequence): it leaves 126 bytes for the prefix; 120 keeps some margin.
const MaxInboxPrefix = 120

// CheckTenant refuses a tenant that TenantOf refuses in a subject, nil for one it reads: one
// longer than MaxUserBytes, or the empty one. No mcpstream service serves either. A client that
// sent a long one would build subjects from it in which each byte that is not a letter, digit,
// '_' or '-' takes three: past the NATS server's max_control_line (4 KiB by default), which
// closes the connection that publishes or subscribes there, every request in flight on it cut.
// The empty one (token "~") is no tenant: a call stored under it is refused by the workers with
// no answer stored anywhere, and a wait for its answer would last until its context ended.
// Clients refuse such a tenant before sending anything.
func CheckTenant(tenant string) *Error {
	switch {
	case tenant == "":
		return &Error{Code: CodeBadRequest, Message: "the tenant is empty"}
	case len(tenant) > MaxUserBytes:
		return &Error{Code: CodeBadRequest, Message: fmt.Sprintf("the tenant is %d bytes long; at most %d", len(tenant), MaxUserBytes)}
	}
	return nil
}

// Check refuses a principal past the limits above (nil when it is within them).
func (p Principal) Check() *Error {
	bad := func(format string, a ...any) *Error {
		return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case len(p.Tenant) > MaxUserBytes:
		return bad("principal.tenant is %d bytes long; at most %d", len(p.Tenant), MaxUserBytes)
	case len(p.User) > MaxUserBytes:
		return bad("principal.user is %d bytes long; at most %d", len(p.User), MaxUserBytes)
	case len(p.Roles) > MaxRoles:
		return bad("principal.roles has %d roles; at most %d", len(p.Roles), MaxRoles)
	}
	for i, r := range p.Roles {
		if len(r) > MaxRoleBytes {
			return bad("principal.roles[%d] is %d bytes long; at most %d", i, len(r), MaxRoleBytes)
		}
	}
	return nil
}

// CallRequest asks the executor to call one tool. Published to Calls(tenant) with Nats-Msg-Id =
// CallMsgID(tenant, ID) ("call:<tenant>:<id>", tokens encoded, so a resend is never executed
// twice and two tenants' equal ids never meet), or sent to Exec(tenant) as a request.
type CallRequest struct {
	V         int             `json:"v"`
	ID        string          `json:"id"`   // caller-chosen call id, unique per tenant; the dedup key
	Tool      string          `json:"tool"` // public name server__tool
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Principal Principal       `json:"principal"`
	// TimeoutMs bounds the tools/call; 0 means the executor's default.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// ApprovalTimeoutMs bounds the wait in needs_approval; 0 means the executor's default.
	ApprovalTimeoutMs int64     `json:"approvalTimeoutMs,omitempty"`
	RequestedAt       time.Time `json:"requestedAt,omitzero"`
}

// Call outcomes (CallResult.Status).
const (
	CallOK      = "ok"      // tools/call answered; Result holds the MCP result (isError may be true)
	CallRefused = "refused" // refused before dispatch; nothing executed
	CallFailed  = "failed"  // dispatched and failed (protocol or transport), or outcome unknown
)

// Error codes that cross NATS (CallResult.Error.Code and catalog errors). Stable: clients match
// on them.
const (
	CodeBadRequest       = "bad_request"
	CodeTooLarge         = "too_large"
	CodeNotFound         = "not_found"
	CodeStale            = "stale"
	CodeUnavailable      = "unavailable"
	CodeForbidden        = "forbidden"
	CodeUnknownPrincipal = "unknown_principal"
	CodeNeedsApproval    = "needs_approval"
	CodeDenied           = "denied"
	CodeApprovalTimeout  = "approval_timeout"
	CodeInvalidArguments = "invalid_arguments"
	CodeRateLimited      = "rate_limited"
	CodeTimeout          = "timeout"
	CodeResultTooLarge   = "result_too_large"
	CodeOutcomeUnknown   = "outcome_unknown"
	CodeProtocolError    = "protocol_error"
	CodeTransportError   = "transport_error"
	CodeInternal         = "internal"
)

// Error is the JSON error every mcpstream request/reply and result carries.
type Error struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Path         string `json:"path,omitempty"`         // invalid_arguments: JSON pointer of the failure in the arguments; protocol_error of a result that fails its outputSchema: in the MCP result; bad_request, too_large of a servers request: the member at fault ("/limit", "/after")
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"` // rate_limited; unavailable, outcome_unknown, timeout (a task's tasks/get refused with one past the deadline): the server's Retry-After
	Reason       string `json:"reason,omitempty"`       // unavailable, stale: why
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// CallResult is the one terminal answer to a call, published to Result(tenant, id) and returned
// to Exec requesters.
type CallResult struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Tool   string `json:"tool"`
	Status string `json:"status"` // ok | refused | failed
	// Result is the MCP CallToolResult JSON as the server sent it (content, structuredContent,
	// isError), when Status is ok.
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *Error          `json:"error,omitempty"`
	Attempts   int             `json:"attempts,omitempty"`
	Duplicate  bool            `json:"duplicate,omitempty"` // the answer of an earlier identical call id
	StartedAt  time.Time       `json:"startedAt,omitzero"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
}

// Approval approves or denies a call waiting in needs_approval.
type Approval struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Approve bool   `json:"approve"`
	// Tenant, when set, must be the tenant of the waiting call (call ids are unique per tenant).
	Tenant string `json:"tenant,omitempty"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AuditEvent records one step of a call: "request", "decision", "dispatch", "result".
type AuditEvent struct {
	V         int             `json:"v"`
	Type      string          `json:"type"` // audit.request | audit.decision | audit.dispatch | audit.result
	CallID    string          `json:"callId"`
	Tenant    string          `json:"tenant"`
	User      string          `json:"user,omitempty"`
	Roles     []string        `json:"roles,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Server    string          `json:"server,omitempty"`
	Decision  string          `json:"decision,omitempty"` // allowed, or the refusal code
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"` // redacted, capped
	Result    json.RawMessage `json:"result,omitempty"`    // redacted, capped
	Truncated bool            `json:"truncated,omitempty"`
	ArgBytes  int             `json:"argBytes,omitempty"`
	ResBytes  int             `json:"resultBytes,omitempty"`
	IsError   bool            `json:"isError,omitempty"`
	At        time.Time       `json:"at"`
}

// RelistRequest asks a server's connector to re-list now (for example when a TTL ran out).
type RelistRequest struct {
	V    int    `json:"v"`
	Kind Kind   `json:"kind,omitempty"` // empty: every kind
	Why  string `json:"why,omitempty"`
}

// RelistReply answers a RelistRequest once the new snapshot is published.
type RelistReply struct {
	V           int       `json:"v"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Sequence    uint64    `json:"sequence,omitempty"` // registry stream sequence of the snapshot, if new
	ListedAt    time.Time `json:"listedAt,omitzero"`  // when the list was confirmed, changed or not
	Error       *Error    `json:"error,omitempty"`
}

// DispatchRequest asks a server's connector to run tools/call on the session it holds. Only the
// executor sends it; the credentials stay with the connector.
type DispatchRequest struct {
	V         int             `json:"v"`
	CallID    string          `json:"callId"`
	Tool      string          `json:"tool"` // the original (server-side) tool name
	Arguments json.RawMessage `json:"arguments,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
}

// DispatchReply carries the raw CallToolResult, or an error whose Code tells whether the call
// reached the server (protocol_error, timeout, outcome_unknown) or not (unavailable).
//
// NotSent (with Error; added later in v1) says that the request never left the connector:
// nothing reached the server (it is not connected, the deadline passed before sending, the
// connector is full...), so the call used none of the server's capacity. A server's own
// refusal (HTTP 429, 401) reached it and is not NotSent. A connector older than the field says
// so only in Error.Message ("nothing was sent").
//
// Withheld (with a protocol_error Error; added later in v1) is the server's tools/call result
// that the connector refused for its shape (an isError that is not a boolean, a content that
// is not an array of objects: whether the tool failed cannot be told), as the connector passes
// results on (its configured secrets redacted). It is not the call's result: the caller never
// gets it; the executor keeps it in the audit result event (capped and redacted, as it keeps a
// result that fails its outputSchema). A connector older than the field sends none, and an
// executor older than it ignores it.
type DispatchReply struct {
	V        int             `json:"v"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *Error          `json:"error,omitempty"`
	NotSent  bool            `json:"notSent,omitempty"`
	Withheld json.RawMessage `json:"withheld,omitempty"`
}
