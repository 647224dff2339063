package subjects

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A registry message decodes only when its payload matches its subject: server, event and kind.
func TestDecodeRegistryMsg(t *testing.T) {
	status := []byte(`{"v":1,"type":"status","server":"kb","status":"ready"}`)
	if ev, err := DecodeRegistryMsg(RegistryStatus("kb"), status); err != nil || ev.Status == nil {
		t.Fatalf("matching message: %+v, %v", ev, err)
	}
	snap := []byte(`{"v":1,"type":"snapshot","server":"a.b","kind":"tools","items":[]}`)
	if ev, err := DecodeRegistryMsg(RegistrySnapshot("a.b", KindTools), snap); err != nil || ev.Snapshot == nil {
		t.Fatalf("matching snapshot: %+v, %v", ev, err)
	}
	conf := []byte(`{"v":1,"type":"confirmed","server":"kb","kind":"tools","fingerprint":"ab","listedAt":"2026-11-30T12:00:00Z"}`)
	if ev, err := DecodeRegistryMsg(RegistryConfirmed("kb", KindTools), conf); err != nil || ev.Confirmed == nil {
		t.Fatalf("matching confirmation: %+v, %v", ev, err)
	}
	for _, tc := range []struct {
		subject string
		data    []byte
	}{
		{RegistryConfirmed("kb", KindPrompts), conf},                               // another kind
		{RegistryChanged("kb", KindTools), conf},                                   // another event
		{RegistryConfirmed("other", KindTools), conf},                              // another server
		{RegistryStatus("other"), status},                                          // another server
		{RegistryRevoked("kb"), status},                                            // another event
		{RegistrySnapshot("a.b", KindPrompts), snap},                               // another kind
		{RegistryChanged("a.b", KindTools), snap},                                  // another event
		{Root + ".registry.kb.status.x", status},                                   // not a registry subject
		{RegistryStatus("kb"), []byte(`{"v":2,"type":"status","server":"kb"}`)},    // another version
		{RegistryRevoked("kb"), []byte(`{"v":1,"type":"revoked","server":"KB"}`)},  // names differ in case
		{RegistryStatus("kb"), []byte(`{"v":1,"type":"status","server":"kb"} {}`)}, // trailing data
		// The payload holds the server's name, never its subject token (README).
		{RegistryRevoked("my.server"), []byte(`{"v":1,"type":"revoked","server":"my~2Eserver","tools":["x"]}`)},
	} {
		if _, err := DecodeRegistryMsg(tc.subject, tc.data); !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrBadSubject) {
			t.Errorf("DecodeRegistryMsg(%s, %s) error = %v, want ErrBadPayload or ErrBadSubject", tc.subject, tc.data, err)
		}
	}
}

// The payloads of the request/reply subjects beside the catalog and call ones (approvals,
// re-list, dispatch, details, servers) are public API too: pinned like the others.
func TestGoldenMorePayloads(t *testing.T) {
	payloads := map[string]any{
		"approval":       Approval{V: Version, ID: "c-1", Approve: true, Tenant: "acme", By: "bob", Reason: "looks right"},
		"approval_reply": ApprovalReply{V: Version, OK: false, Error: &Error{Code: CodeApprovalTimeout, Message: "call c-1 no longer waits for approval: it timed out"}},
		"relist_request": RelistRequest{V: Version, Kind: KindTools, Why: "ttl expired before a call of ticketing__createIssue"},
		"relist_reply":   RelistReply{V: Version, Fingerprint: "9f86d081884c7d65", Sequence: 42, ListedAt: at},
		"dispatch_request": DispatchRequest{V: Version, CallID: "c-1", Tool: "createIssue",
			Arguments: json.RawMessage(`{"title":"Disk full"}`), TimeoutMs: 30000},
		"dispatch_reply": DispatchReply{V: Version, Error: &Error{Code: CodeOutcomeUnknown, Message: "the connection failed after the call was sent; it may have run"}},
		// A result refused for its shape, kept for the audit trail (additive: the one above is unchanged).
		"dispatch_reply_withheld": DispatchReply{V: Version, Error: &Error{Code: CodeProtocolError,
			Message: "server answered a result whose content is not an array; the call ran"},
			Withheld: json.RawMessage(`{"content":"done","isError":false}`)},
		"details_request": DetailsRequest{V: Version, Names: []string{"ticketing__createIssue"}, Principal: Principal{Tenant: "acme", User: "alice"}},
		"details_reply":   DetailsReply{V: Version, Tools: []ToolInfo{{Name: "ticketing__createIssue", Server: "ticketing", Tool: "createIssue", State: StateFresh, InputSchema: json.RawMessage(`{"type":"object"}`), CacheScope: ScopePublic, TTLMs: ttl(60000), ListedAt: "2026-11-30T12:00:00Z"}}},
		"servers_request": ServersRequest{V: Version, Principal: Principal{User: "alice"}},
		"servers_reply":   ServersReply{V: Version, Servers: []ServerSummary{{Name: "ticketing", Description: "Issue tracker", Status: StatusReady, Tools: 3, Transport: "stdio", Protocol: "2025-11-25"}}},
		// Paging and rejected definitions (additive: the two above are unchanged).
		"servers_request_page": ServersRequest{V: Version, Principal: Principal{User: "alice"}, Limit: 50, After: "kb"},
		"servers_reply_page": ServersReply{V: Version, Next: "ticketing", Servers: []ServerSummary{{Name: "ticketing", Status: StatusReady, Tools: 3,
			Rejected: []RejectedDefinition{
				{Kind: KindTools, Name: "get_[redacted]", Code: CodeSecretInName, Message: "its name holds a configured secret value"},
				{Kind: KindTools, Name: "createIssue", Code: CodeNameCollision, Message: "its public name ticketing__createIssue is held by another tool"},
				{Kind: KindTools, Code: CodeInvalidDefinition, Message: "a tool needs a non-empty string name"}},
			RejectedMore: 7}}},
		"servers_reply_bad_limit": ServersReply{V: Version, Servers: []ServerSummary{},
			Error: &Error{Code: CodeBadRequest, Message: "limit 5000 out of range 1..1000 (0 = 100)", Path: "/limit"}},
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, p) })
	}
}

// The refusal of a payload that names another server quotes that name, bounded: it reaches
// logs and `mcpstream events`, and the name is the payload's, from whoever published it.
func TestDecodeRegistryMsgErrorQuotesServer(t *testing.T) {
	evil := "x\n\x1b[31m" + strings.Repeat("y", 100_000)
	data, _ := json.Marshal(map[string]any{"v": 1, "type": "status", "server": evil, "status": "ready"})
	_, err := DecodeRegistryMsg(RegistryStatus("kb"), data)
	if !errors.Is(err, ErrBadPayload) {
		t.Fatalf("error = %v, want ErrBadPayload", err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\x1b") || len(msg) > 300 || !strings.Contains(msg, `"x\n\x1b[31myyy`) {
		t.Errorf("error = %.400q (%d bytes), want the server quoted and bounded", msg, len(msg))
	}
}

// TestDecodeSnapshotScope: a snapshot's cacheScope reaches consumers as "public", "private" or
// "" (public, MCP's default), whoever published it: every consumer (policy.MayUseScope, the
// catalog's scope overview) tells private from public by the exact word "private", so a
// "Private" or an unknown word read as it is showed a private list to every principal.
func TestDecodeSnapshotScope(t *testing.T) {
	for scope, want := range map[string]string{
		`"private"`: ScopePrivate, `"Private"`: ScopePrivate, `"PRIVATE"`: ScopePrivate,
		`"shared"`: ScopePrivate, `" public"`: ScopePrivate,
		`"public"`: ScopePublic, `"Public"`: ScopePublic,
		`""`: "", `null`: "",
	} {
		data := []byte(`{"v":1,"type":"snapshot","server":"kb","kind":"tools","items":[],"cacheScope":` + scope + `}`)
		ev, err := DecodeRegistryMsg(RegistrySnapshot("kb", KindTools), data)
		if err != nil || ev.Snapshot == nil {
			t.Fatalf("cacheScope %s: %+v, %v", scope, ev, err)
		}
		if ev.Snapshot.CacheScope != want {
			t.Errorf("cacheScope %s decoded as %q, want %q", scope, ev.Snapshot.CacheScope, want)
		}
	}
	ev, err := DecodeRegistry([]byte(`{"v":1,"type":"snapshot","server":"kb","kind":"tools","items":[],"cacheScope":"Private"}`))
	if err != nil || ev.Snapshot.CacheScope != ScopePrivate {
		t.Errorf("DecodeRegistry: cacheScope %q, %v; want private", ev.Snapshot.CacheScope, err)
	}
}
