package subjects

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var at = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ttl(ms int64) *int64 { return &ms }

// The wire form of every payload is public API: these golden files pin it.
func TestGoldenPayloads(t *testing.T) {
	payloads := map[string]any{
		"snapshot": Snapshot{V: Version, Type: EventSnapshot, Server: "ticketing", Kind: KindTools,
			Fingerprint: "9f86d081884c7d65", ListedAt: at, Pages: 1, TTLMs: ttl(60000), CacheScope: ScopePublic,
			Items:    []json.RawMessage{json.RawMessage(`{"name":"createIssue","inputSchema":{"type":"object","oneOf":[{"required":["title"]}]}}`)},
			Rejected: []Rejected{{Name: "huge", Code: CodeDefinitionTooLarge, Message: "definition is 5242880 bytes, limit 262144"}},
			Info:     &ServerInfo{Description: "Issue tracker", Transport: "stdio", Protocol: "2025-11-25", Name: "ticketing", Version: "1.0.0"}},
		"changed": ListChanged{V: Version, Type: EventChanged, Server: "ticketing", Kind: KindTools, At: at},
		"confirmed": Confirmed{V: Version, Type: EventConfirmed, Server: "ticketing", Kind: KindTools,
			Fingerprint: "9f86d081884c7d65", ListedAt: at},
		// The unchanged re-list that answers the ListChanged stored at sequence 41.
		"confirmed_after_changed": Confirmed{V: Version, Type: EventConfirmed, Server: "ticketing", Kind: KindTools,
			Fingerprint: "9f86d081884c7d65", ListedAt: at, AfterSeq: 41},
		"status": Status{V: Version, Type: EventStatus, Server: "ticketing", Status: StatusUnavailable,
			Code: CodeConnectionLost, Reason: "process exited", Attempt: 2, RetryInMs: 500,
			Connector: "Zq3Xb2mVhY7TkP0rLw9d1A", HeartbeatMs: 5000, At: at},
		"heartbeat": Heartbeat{V: Version, Type: EventHeartbeat, Connector: "Zq3Xb2mVhY7TkP0rLw9d1A", EveryMs: 5000, At: at},
		"revoked":   Revocation{V: Version, Type: EventRevoked, Server: "ticketing", Tools: []string{"closeIssue"}, Reason: "incident 42", At: at},
		"call_request": CallRequest{V: Version, ID: "c-1", Tool: "ticketing__createIssue",
			Arguments: json.RawMessage(`{"title":"Disk full","body":"...","priority":"high"}`),
			Principal: Principal{User: "alice", Roles: []string{"dev"}}, TimeoutMs: 30000},
		"call_result_ok": CallResult{V: Version, ID: "c-1", Tenant: "acme", Tool: "ticketing__createIssue", Status: CallOK,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"TCK-1"}],"structuredContent":{"id":"TCK-1"},"isError":false}`), Attempts: 1, StartedAt: at, FinishedAt: at},
		"call_result_refused": CallResult{V: Version, ID: "c-2", Tenant: "acme", Tool: "ticketing__createIssue", Status: CallRefused,
			Error: &Error{Code: CodeInvalidArguments, Message: "missing property 'title'", Path: "/title"}},
		"audit": AuditEvent{V: Version, Type: "audit.decision", CallID: "c-1", Tenant: "acme", User: "alice", Tool: "ticketing__createIssue",
			Server: "ticketing", Decision: CodeForbidden, Code: CodeForbidden, Message: "no rule allows it", At: at},
		"search_request": SearchRequest{V: Version, Query: "open a ticket", K: 5, Detail: DetailSummary, Principal: Principal{Tenant: "acme", User: "alice"}},
		"search_reply": SearchReply{V: Version, Tools: []ToolInfo{{Name: "ticketing__createIssue", Server: "ticketing", Tool: "createIssue",
			Description: "Create a ticket", Score: 7.25, Labels: []string{"needs-approval"}, State: StateFresh}}, Ranking: RankingLexical},
		"error_reply": SearchReply{V: Version, Tools: []ToolInfo{}, Error: &Error{Code: CodeBadRequest, Message: "k must be between 1 and 100"}},
		// The $SRV.INFO metadata keys of catalog replicas and executors (discovery.go).
		"policy_metadata": PolicyInfo{Role: RoleExecutor, Instance: "host-1:4242/0", PolicyDigest: "v1-29d5e78c7ab749ac3e05bb1cb2a727cc"}.Metadata(),
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, p) })
	}
}

func TestDecodeRegistry(t *testing.T) {
	for _, name := range []string{"snapshot", "changed", "confirmed", "confirmed_after_changed", "status", "revoked"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := DecodeRegistry(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ev.Snapshot == nil && ev.ListChanged == nil && ev.Status == nil && ev.Revocation == nil && ev.Confirmed == nil {
			t.Fatalf("%s: decoded nothing", name)
		}
	}
	raw := `{"name":"createIssue","inputSchema":{"type":"object","oneOf":[{"required":["title"]}],"$defs":{"p":{"enum":[1.50,2e3]}}}}`
	snap, _ := json.Marshal(Snapshot{V: Version, Type: EventSnapshot, Server: "s", Kind: KindTools, Items: []json.RawMessage{json.RawMessage(raw)}})
	ev, err := DecodeRegistry(snap)
	if err != nil {
		t.Fatal(err)
	}
	// Raw definitions survive byte for byte (root-level oneOf, $defs, number spelling included);
	// only insignificant whitespace is compacted by encoding/json.
	if got, want := string(ev.Snapshot.Items[0]), raw; got != want {
		t.Errorf("item = %s, want %s", got, want)
	}
	bad := []string{``, `{`, `[]`, `{"v":2,"type":"status","server":"x"}`, `{"v":1,"type":"nope","server":"x"}`,
		`{"v":1,"type":"status"}`, `{"v":1,"type":"snapshot","server":"x","kind":"widgets"}`, `{"v":1,"type":"status","server":"x","at":5}`,
		// A status event must say the status: an empty one read as "no status yet", which a
		// server that was never ready is not.
		`{"v":1,"type":"status","server":"x"}`, `{"v":1,"type":"status","server":"x","status":""}`,
		// A confirmation names the list it confirms, and when.
		`{"v":1,"type":"confirmed","server":"x","kind":"tools","listedAt":"2026-11-30T12:00:00Z"}`,
		`{"v":1,"type":"confirmed","server":"x","kind":"tools","fingerprint":"ab"}`,
		`{"v":1,"type":"confirmed","server":"x","kind":"widgets","fingerprint":"ab","listedAt":"2026-11-30T12:00:00Z"}`,
		// afterSeq is a stream sequence.
		`{"v":1,"type":"confirmed","server":"x","kind":"tools","fingerprint":"ab","listedAt":"2026-11-30T12:00:00Z","afterSeq":-1}`,
		`{"v":1,"type":"confirmed","server":"x","kind":"tools","fingerprint":"ab","listedAt":"2026-11-30T12:00:00Z","afterSeq":"41"}`}
	for _, b := range bad {
		if _, err := DecodeRegistry([]byte(b)); !errors.Is(err, ErrBadPayload) {
			t.Errorf("DecodeRegistry(%q) error = %v, want ErrBadPayload", b, err)
		}
	}
}

func TestSubjects(t *testing.T) {
	tests := []struct{ got, want string }{
		{RegistrySnapshot("a.b", KindTools), "mcpstream.v1.registry.a~2Eb.snapshot.tools"},
		{RegistryChanged("kb", KindPrompts), "mcpstream.v1.registry.kb.changed.prompts"},
		{RegistryConfirmed("a.b", KindTools), "mcpstream.v1.registry.a~2Eb.confirmed.tools"},
		{RegistryStatus("kb"), "mcpstream.v1.registry.kb.status"},
		{HeartbeatSubject("Zq3X.b"), "mcpstream.v1.heartbeat.Zq3X~2Eb"},
		{RegistryRevoked("kb"), "mcpstream.v1.registry.kb.revoked"},
		{Calls("acme"), "mcpstream.v1.calls.acme"},
		{Exec("acme corp"), "mcpstream.v1.exec.acme~20corp"},
		{Result("acme", "c.1"), "mcpstream.v1.results.acme.c~2E1"},
		{Audit("acme", "result"), "mcpstream.v1.audit.acme.result"},
		{AuditNoTenant("decision"), "mcpstream.v1.audit.~~.decision"},
		{Approvals("acme", "c-1"), "mcpstream.v1.approvals.acme.c-1"},
		{Relist("kb"), "mcpstream.v1.control.relist.kb"},
		{Dispatch("kb"), "mcpstream.v1.dispatch.kb"},
		{CatalogSearch("acme"), "mcpstream.v1.catalog.acme.search"},
		{CatalogDetails("a.b"), "mcpstream.v1.catalog.a~2Eb.details"},
		{CatalogServers("local"), "mcpstream.v1.catalog.local.servers"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if tenant, err := DecodeToken(NoTenantToken); err == nil {
		t.Errorf("NoTenantToken decodes (to %q): a tenant could have it", tenant)
	}
	rs, err := ParseRegistry(RegistrySnapshot("a.b c", KindResources))
	if err != nil || rs.Server != "a.b c" || rs.Event != EventSnapshot || rs.Kind != KindResources {
		t.Errorf("ParseRegistry = %+v, %v", rs, err)
	}
	if rs, err := ParseRegistry(RegistryConfirmed("kb", KindPrompts)); err != nil || rs.Server != "kb" || rs.Event != EventConfirmed || rs.Kind != KindPrompts {
		t.Errorf("ParseRegistry(confirmed) = %+v, %v", rs, err)
	}
	for _, s := range []string{"foo.bar", Root + ".registry.x", Root + ".registry.x.snapshot.widgets", Root + ".registry.x.confirmed", Root + ".registry.~ZZ.status", Root + ".registry.x.status.extra"} {
		if _, err := ParseRegistry(s); !errors.Is(err, ErrBadSubject) {
			t.Errorf("ParseRegistry(%q) error = %v, want ErrBadSubject", s, err)
		}
	}
	if tn, err := TenantOf(Result("a.c", "id")); err != nil || tn != "a.c" {
		t.Errorf("TenantOf = %q, %v", tn, err)
	}
	// A tenant is bounded like principal.tenant: the subjects built from it must fit a NATS
	// control line.
	if tn, err := TenantOf(Calls(strings.Repeat(".", MaxUserBytes))); err != nil || len(tn) != MaxUserBytes {
		t.Errorf("TenantOf of a %d-byte tenant: %d bytes, %v", MaxUserBytes, len(tn), err)
	}
	if tn, err := TenantOf(Calls(strings.Repeat("t", MaxUserBytes+1))); !errors.Is(err, ErrBadSubject) {
		t.Errorf("TenantOf of a %d-byte tenant = %d bytes, %v; want ErrBadSubject", MaxUserBytes+1, len(tn), err)
	}
	// The empty tenant is none: no principal acts in it (one without a tenant is the local one's).
	for _, s := range []string{Calls(""), Exec(""), Result("", "id"), CatalogSearch("")} {
		if tn, err := TenantOf(s); !errors.Is(err, ErrBadSubject) {
			t.Errorf("TenantOf(%q) = %q, %v; want ErrBadSubject", s, tn, err)
		}
	}
	if id, err := LastToken(Approvals("acme", "x y")); err != nil || id != "x y" {
		t.Errorf("LastToken = %q, %v", id, err)
	}
}

// The stream declarations are public API too (names, subjects, retention, limits): pinned here
// with the defaults, and with the retention options set.
func TestStreamsGolden(t *testing.T) {
	for name, o := range map[string]StreamOptions{
		"streams_default":   {},
		"streams_retention": {Replicas: 3, ResultsMaxAge: time.Hour, ResultsMaxBytes: 1 << 30, AuditMaxAge: 30 * 24 * time.Hour, AuditMaxBytes: 50 << 30},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(Streams(o), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./subjects -update to create)", err)
			}
			if string(append(got, '\n')) != string(want) {
				t.Errorf("stream declarations changed (run go test ./subjects -update if intended):\n%s", got)
			}
		})
	}
}

// checkGolden compares v's indented JSON with testdata/NAME.golden.json (-update rewrites it).
func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./subjects -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
