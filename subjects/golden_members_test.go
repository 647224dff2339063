package subjects

import (
	"encoding/json"
	"testing"
)

// TestGoldenEveryMember pins the wire form of the optional members the other golden files leave
// out (each payload here sets them all): an integrator reads them from these files as from the
// others (additive: the files of TestGoldenPayloads and TestGoldenMorePayloads are unchanged).
func TestGoldenEveryMember(t *testing.T) {
	payloads := map[string]any{
		"status_ready": Status{V: Version, Type: EventStatus, Server: "ticketing", Status: StatusReady,
			Description: "Issue tracker", Transport: "stdio", Protocol: "2025-11-25",
			Connector: "Zq3Xb2mVhY7TkP0rLw9d1A", HeartbeatMs: 5000, At: at},
		"revoked_restore": Revocation{V: Version, Type: EventRevoked, Server: "ticketing", Tools: []string{"*"},
			Restore: []string{"closeIssue"}, Reason: "incident 42 closed", At: at},
		"audit_request": AuditEvent{V: Version, Type: "audit." + AuditRequest, CallID: "c-1", Tenant: "acme", User: "alice",
			Roles: []string{"dev"}, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"title":"Disk full","token":"[redacted]"}`),
			ArgBytes: 52, At: at},
		"audit_dispatch": AuditEvent{V: Version, Type: "audit." + AuditDispatch, CallID: "c-1", Tenant: "acme", User: "alice",
			Tool: "ticketing__createIssue", Server: "ticketing", Decision: "dispatch",
			Message: "tools/call createIssue on ticketing (timeout 30s)", At: at},
		"audit_result": AuditEvent{V: Version, Type: "audit." + AuditResult, CallID: "c-1", Tenant: "acme", User: "alice",
			Tool: "ticketing__createIssue", Server: "ticketing", Decision: CallOK, IsError: true,
			// Over the cap: the start of the result's JSON text, as a string.
			Result:    json.RawMessage(`"{\"content\":[{\"type\":\"text\",\"text\":\"quota exceeded: 12 of 10 tickets"`),
			Truncated: true, ResBytes: 70000, At: at},
		"call_result_failed": CallResult{V: Version, ID: "c-3", Tenant: "acme", Tool: "ticketing__createIssue", Status: CallFailed,
			Error: &Error{Code: CodeOutcomeUnknown, Message: "server answered HTTP 503 after the call was sent; it may have run",
				RetryAfterMs: 2000, Reason: "http 503"}, Attempts: 1, Duplicate: true, StartedAt: at, FinishedAt: at},
		"search_request_filters": SearchRequest{V: Version, Query: "list tickets", K: 10, Detail: DetailFull,
			Principal: Principal{Tenant: "acme", User: "alice", Roles: []string{"dev", "support"}},
			Servers:   []string{"ticketing"}, Tags: []string{"read-only"}, IncludeUnavailable: true},
		"details_reply_full": DetailsReply{V: Version, Tools: []ToolInfo{{Name: "ticketing__listIssues", Server: "ticketing",
			Tool: "listIssues", Title: "List issues", Description: "List tickets", Labels: []string{"read-only", "idempotent", "expired"},
			State: "expired", StateReason: "ttlMs 60000 ran out at 2026-11-30T12:01:00Z",
			InputSchema:  json.RawMessage(`{"type":"object"}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"integer"}}}`),
			Annotations:  json.RawMessage(`{"readOnlyHint":true,"idempotentHint":true}`),
			Definition:   json.RawMessage(`{"name":"listIssues","title":"List issues","description":"List tickets","inputSchema":{"type":"object"}}`),
			CacheScope:   ScopePrivate, TTLMs: ttl(60000), ListedAt: "2026-11-30T12:00:00Z"}}},
		"approval_reply_ok": ApprovalReply{V: Version, OK: true},
		"error_reply_rebuilding": SearchReply{V: Version, Tools: []ToolInfo{},
			Error: &Error{Code: CodeUnavailable, Message: "catalog replica is catching up with the registry stream", Reason: "rebuilding"}},
		"policy_metadata_executor": PolicyInfo{Role: RoleExecutor, Instance: "host-1:4242", PolicyDigest: "v1-29d5e78c7ab749ac3e05bb1cb2a727cc",
			EnforcementDigest: "v1-0f3a9c1d5e7b2a4c6e8f0a1b3c5d7e9f"}.Metadata(),
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, p) })
	}
}

// TestGoldenDocumentedMembers pins the documented members no golden file held before: a
// snapshot's authContext, a call's approvalTimeoutMs and requestedAt, a dispatch's result and
// notSent, the error of a re-list and of a details request, a server's reason (additive: the
// other files are unchanged). TestGoldenCoversEveryMember keeps every member pinned.
func TestGoldenDocumentedMembers(t *testing.T) {
	payloads := map[string]any{
		"snapshot_private": Snapshot{V: Version, Type: EventSnapshot, Server: "ticketing", Kind: KindTools,
			Fingerprint: "9f86d081884c7d65", ListedAt: at, Pages: 1, CacheScope: ScopePrivate, AuthContext: "tenant:acme",
			Items: []json.RawMessage{json.RawMessage(`{"name":"listIssues","inputSchema":{"type":"object"}}`)}},
		"call_request_full": CallRequest{V: Version, ID: "c-1", Tool: "ticketing__createIssue",
			Arguments: json.RawMessage(`{"title":"Disk full"}`), Principal: Principal{Tenant: "acme", User: "alice", Roles: []string{"dev"}},
			TimeoutMs: 30000, ApprovalTimeoutMs: 300000, RequestedAt: at},
		"dispatch_reply_ok": DispatchReply{V: Version,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"TCK-1"}],"isError":false}`)},
		"dispatch_reply_not_sent": DispatchReply{V: Version, NotSent: true, Error: &Error{Code: CodeUnavailable,
			Message: "server ticketing is not connected (connecting); nothing was sent", Reason: "process exited"}},
		"relist_reply_error": RelistReply{V: Version, Error: &Error{Code: CodeUnavailable,
			Message: "the server refused the list: HTTP 429", RetryAfterMs: 30000, Reason: "http 429"}},
		"details_reply_error": DetailsReply{V: Version, Tools: []ToolInfo{},
			Error: &Error{Code: CodeBadRequest, Message: "names is required"}},
		"servers_reply_unavailable": ServersReply{V: Version, Servers: []ServerSummary{{Name: "ticketing", Status: StatusUnavailable,
			Reason: "process exited", Tools: 3, Transport: "stdio"}}},
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, p) })
	}
}
