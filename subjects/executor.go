package subjects

import "strconv"

// Executor state and names beyond the subject map of doc.go (added with the executor; additive).
//
//	stream MCPSTREAM_LIMITS (limits, memory, counter CRDTs: AllowMsgCounter)
//	  mcpstream.v1.limits.<scope>.<key>.<window>       rate-limit window counters (Nats-Incr)
//	KV bucket MCPSTREAM_INFLIGHT (file, 24 h)          claims of side-effecting calls: <tenant>.<callID>
//	                                                   approval waits: <tenant>.<callID>.approval.<seq>
//	KV bucket MCPSTREAM_SLOTS (memory, lease TTL)      concurrency slots: <scope>.<key>.<n>
//
// The executor declares them itself (executor.EnsureState); nothing else reads or writes them.
const (
	// LimitsStream holds the executor's rate-limit counters, shared by every executor worker.
	LimitsStream = "MCPSTREAM_LIMITS"
	// LimitsAll is the subject filter of LimitsStream.
	LimitsAll = Root + ".limits.>"
	// InflightBucket is the KV bucket of claims: a side-effecting call is claimed here before it
	// is dispatched, so a redelivered request is never dispatched twice. It also keeps the
	// approval record of each request held for approval (when its wait began, how it ended),
	// shared by every delivery of the request.
	InflightBucket = "MCPSTREAM_INFLIGHT"
	// SlotsBucket is the KV bucket of concurrency slots (leases with a TTL).
	SlotsBucket = "MCPSTREAM_SLOTS"
	// ExecutorConsumer is the durable pull consumer every executor worker shares on CallsStream.
	ExecutorConsumer = "mcpstream-executor"
	// ExecutorQueue is the queue group of the executor front ends on ExecAll.
	ExecutorQueue = "mcpstream-executor"
)

// Limit scopes (the <scope> token of LimitWindow).
const (
	LimitScopeTenant = "tenant"
	LimitScopeServer = "server"
	LimitScopeTool   = "tool"
)

// LimitWindow is the counter subject of one rate-limit window of one scope key (a tenant, a
// server or a public tool name).
func LimitWindow(scope, key string, window int64) string {
	return Root + ".limits." + EncodeToken(scope) + "." + EncodeToken(key) + "." + strconv.FormatInt(window, 10)
}

// ResultMsgID is the Nats-Msg-Id of a call's CallResult on the results stream: a second result
// for the same call is dropped as a duplicate.
func ResultMsgID(tenant, callID string) string {
	return "result:" + EncodeToken(tenant) + ":" + EncodeToken(callID)
}

// CallMsgID is the Nats-Msg-Id of a CallRequest on the calls stream: "call:<tenant>:<callID>",
// both encoded as tokens. Call ids are unique per tenant, so the key holds the tenant: the same id
// from two tenants is two calls, and a resend by one tenant is never run twice.
func CallMsgID(tenant, callID string) string {
	return "call:" + EncodeToken(tenant) + ":" + EncodeToken(callID)
}

// Audit event names (the <event> token of Audit; AuditEvent.Type is "audit." + name).
const (
	AuditRequest  = "request"
	AuditDecision = "decision"
	AuditDispatch = "dispatch"
	AuditResult   = "result"
)

// Decisions recorded by audit.decision events besides the refusal codes.
const (
	DecisionAllowed  = "allowed"
	DecisionApproved = "approved"
)

// ApprovalReply answers an Approval request: OK when a waiting call took the decision.
type ApprovalReply struct {
	V     int    `json:"v"`
	OK    bool   `json:"ok"`
	Error *Error `json:"error,omitempty"`
}
