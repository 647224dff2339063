package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// A modern (2026-07-28) streamable HTTP server with 3 pages of tools: the snapshot holds every
// tool with its raw bytes, the cache hints, and the server info; an unchanged re-list and a
// restart publish nothing new.
func TestHTTPSnapshotPaginationRawAndCacheHints(t *testing.T) {
	t.Parallel()
	srv := newFixture(fixtureOptions{pageSize: 2, ttlMs: 60000, scope: mcp.CacheScopePrivate})
	srv.DeleteTools("pid") // 5 tools, 2 per page: pages of 2, 2 and 1
	want := slices.DeleteFunc(slices.Clone(fixtureTools), func(s string) bool { return s == "pid" })
	url := httpFixture(t, srv)
	sc := ServerConfig{Name: "fx", Description: "the fixture", Transport: TransportHTTP, URL: url, AuthContext: "tenant:acme"}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("fx"))

	snapEv := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	snap := snapEv.ev.Snapshot
	if got := names(t, snap); !slices.Equal(sortedCopy(got), want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if snap.Pages != 3 {
		t.Errorf("pages = %d, want 3", snap.Pages)
	}
	if snap.TTLMs == nil || *snap.TTLMs != 60000 {
		t.Errorf("ttlMs = %v, want 60000", snap.TTLMs)
	}
	if snap.CacheScope != subjects.ScopePrivate || snap.AuthContext != "tenant:acme" {
		t.Errorf("cacheScope = %q, authContext = %q, want private for tenant:acme", snap.CacheScope, snap.AuthContext)
	}
	if snap.Info == nil || snap.Info.Protocol != mcp.ProtocolVersion20260728 || snap.Info.Name != "fixture" ||
		snap.Info.Version != "1.2.3" || snap.Info.Transport != TransportHTTP || snap.Info.Description != "the fixture" {
		t.Errorf("serverInfo = %+v", snap.Info)
	}
	if want := "fx/tools/" + snap.Fingerprint; snapEv.msgID != want {
		t.Errorf("Nats-Msg-Id = %q, want %q", snapEv.msgID, want)
	}
	if len(snap.Rejected) != 0 {
		t.Errorf("rejected = %+v", snap.Rejected)
	}
	// The raw schema survives byte for byte: root oneOf and $defs included.
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(oneOfSchema))
	found := false
	for _, it := range snap.Items {
		var item struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(it, &item); err != nil {
			t.Fatal(err)
		}
		if item.Name == "raw_oneof" {
			found = true
			if !bytes.Equal(item.InputSchema, compact.Bytes()) {
				t.Errorf("raw_oneof inputSchema = %s, want %s", item.InputSchema, compact.Bytes())
			}
		}
	}
	if !found {
		t.Error("raw_oneof missing")
	}
	// mcp-go's decoded type would have lost it: that is why the connector captures raw bytes.
	var decoded mcp.Tool
	for _, it := range snap.Items {
		if bytes.Contains(it, []byte(`"raw_oneof"`)) {
			_ = json.Unmarshal(it, &decoded)
		}
	}
	if b, _ := json.Marshal(decoded.InputSchema); bytes.Contains(b, []byte("oneOf")) {
		t.Logf("note: mcp-go now keeps oneOf in mcp.Tool (%s)", b)
	}

	prompts := rec.wait(0, "prompts snapshot", isSnapshot(subjects.KindPrompts, nil)).ev.Snapshot
	if got := names(t, prompts); !slices.Equal(got, []string{"greet"}) {
		t.Errorf("prompts = %v", got)
	}
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if ready.ev.Status.Protocol != mcp.ProtocolVersion20260728 {
		t.Errorf("ready protocol = %q", ready.ev.Status.Protocol)
	}
	if ready.seq < snapEv.seq {
		t.Errorf("ready (#%d) came before the snapshot (#%d)", ready.seq, snapEv.seq)
	}
	// No resources capability: no resources snapshot.
	for _, e := range rec.all() {
		if e.ev.Snapshot != nil && e.ev.Snapshot.Kind == subjects.KindResources {
			t.Errorf("unexpected resources snapshot %s", e)
		}
	}

	// An unchanged re-list publishes nothing.
	toolsSubj := subjects.RegistrySnapshot("fx", subjects.KindTools)
	before := lastSeq(t, h.env, toolsSubj)
	r := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: subjects.KindTools, Why: "test"})
	if r.Error != nil || r.Fingerprint != snap.Fingerprint || r.Sequence != 0 || r.ListedAt.IsZero() {
		t.Errorf("relist reply = %+v (error %+v), want fingerprint %s, sequence 0", r, r.Error, snap.Fingerprint)
	}
	all := relist(t, h, "fx", subjects.RelistRequest{V: 1})
	if all.Error != nil || all.Sequence != 0 || all.Fingerprint == "" {
		t.Errorf("relist all = %+v (error %+v)", all, all.Error)
	}
	if got := lastSeq(t, h.env, toolsSubj); got != before {
		t.Errorf("unchanged re-list stored a new snapshot: last seq %d → %d", before, got)
	}

	// A restart reads the last fingerprint back from the stream: still nothing new.
	h.stop(t)
	readyCount := countStatus(rec.all(), subjects.StatusReady)
	h2 := run(t, h.env, fastConfig(sc))
	waitUntil(t, "ready after restart", func() bool { return countStatus(rec.all(), subjects.StatusReady) > readyCount })
	if got := lastSeq(t, h2.env, toolsSubj); got != before {
		t.Errorf("restart stored a new snapshot: last seq %d → %d", before, got)
	}
}

func countStatus(evs []event, status string) int {
	n := 0
	for _, e := range evs {
		if e.ev.Status != nil && e.ev.Status.Status == status {
			n++
		}
	}
	return n
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// list_changed over streamable HTTP, modern (subscriptions/listen) and legacy pinned (the GET
// stream): a ListChanged event at once, then a snapshot without the removed tool.
func TestHTTPListChanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, protocol string }{
		{"modern", ""},
		{"legacy", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newFixture(fixtureOptions{})
			url := httpFixture(t, srv)
			h := run(t, nil, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, URL: url, ProtocolVersion: tc.protocol}))
			rec := record(t, h.env, subjects.RegistryServer("fx"))
			ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			wantProto := tc.protocol
			if wantProto == "" {
				wantProto = mcp.ProtocolVersion20260728
			}
			if ready.ev.Status.Protocol != wantProto {
				t.Errorf("protocol = %q, want %q", ready.ev.Status.Protocol, wantProto)
			}
			srv.DeleteTools("echo")
			changed := rec.wait(ready.seq, "tools list_changed", isChanged(subjects.KindTools))
			snap := currentAfter(t, rec, changed.seq)
			if hasName(t, snap.ev.Snapshot, "echo") {
				t.Errorf("list_changed #%d answered by %s, which still holds echo", changed.seq, snap)
			}
			if !strings.Contains(snap.msgID, snap.ev.Snapshot.Fingerprint) {
				t.Errorf("msg id %q lacks the fingerprint", snap.msgID)
			}
		})
	}
}

// A server may change its list before its list_changed reaches the connector: a re-list under
// way then lists the new list and stores it before the ListChanged (on a legacy server, the
// re-list its GET stream asks for when it opens after ready races the first change). The
// ListChanged is answered with a Confirmed of that snapshot; consumers end up holding the new
// list, as when the snapshot comes after. Forced here: the filter hides echo without a
// notification, a re-list stores the list without it, then the notification comes.
func TestHTTPListedBeforeChanged(t *testing.T) {
	t.Parallel()
	var hide atomic.Bool
	srv := server.NewMCPServer("fixture", "1.2.3", server.WithToolCapabilities(true),
		server.WithToolFilter(func(_ context.Context, tools []mcp.Tool) []mcp.Tool {
			if !hide.Load() {
				return tools
			}
			return slices.DeleteFunc(tools, func(t mcp.Tool) bool { return t.Name == "echo" })
		}))
	for _, name := range []string{"echo", "pid"} {
		srv.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name), nil
		})
	}
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, URL: httpFixture(t, srv), ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	hide.Store(true)
	if rr := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}); rr.Error != nil {
		t.Fatalf("relist: %+v", rr.Error)
	}
	listed := rec.wait(ready.seq, "snapshot without echo", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
		return !hasName(t, s, "echo")
	}))
	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(listed.seq, "tools list_changed", isChanged(subjects.KindTools))
	if cur := currentAfter(t, rec, changed.seq); cur.seq != listed.seq {
		t.Errorf("list_changed #%d answered with %s, want the list #%d confirmed", changed.seq, cur, listed.seq)
	}
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, URL: url}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	t.Run("structured", func(t *testing.T) {
		r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "c1", Tool: "echo", Arguments: json.RawMessage(`{"text":"<hi> & bye"}`)})
		if r.Error != nil {
			t.Fatalf("error %+v", r.Error)
		}
		var res struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Echo string `json:"echo"`
				Len  int    `json:"len"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		if res.IsError || res.StructuredContent.Echo != "<hi> & bye" || res.StructuredContent.Len != 10 {
			t.Errorf("result %s", r.Result)
		}
		// The server's own bytes, not a re-encoding (mcp-go servers escape < > &).
		if !bytes.Contains(r.Result, []byte(`"echo":"\u003chi\u003e \u0026 bye"`)) {
			t.Errorf("result was re-encoded: %s", r.Result)
		}
	})
	t.Run("in process", func(t *testing.T) {
		r := h.m.Dispatch(context.Background(), "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		if r.Error != nil || resultText(t, r.Result) != "x" {
			t.Errorf("reply %+v %s", r.Error, r.Result)
		}
	})
	t.Run("isError", func(t *testing.T) {
		r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, Tool: "fail"})
		if r.Error != nil {
			t.Fatalf("error %+v", r.Error)
		}
		if !bytes.Contains(r.Result, []byte(`"isError":true`)) || resultText(t, r.Result) != "it failed on purpose" {
			t.Errorf("result %s", r.Result)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, Tool: "nope"})
		if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "-32602") {
			t.Errorf("reply %+v %s", r.Error, r.Result)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, Tool: "slow", Arguments: json.RawMessage(`{"ms":60000}`), TimeoutMs: 100})
		if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
			t.Errorf("reply %+v %s", r.Error, r.Result)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`[1]`)})
		if r.Error == nil || r.Error.Code != subjects.CodeBadRequest {
			t.Errorf("reply %+v", r.Error)
		}
	})
	t.Run("unknown server", func(t *testing.T) {
		// No endpoint: another registrysync process may run it (no process: no responders).
		for _, subj := range []string{subjects.Dispatch("nobody"), subjects.Relist("nobody")} {
			if _, err := h.env.NC.Request(subj, []byte(`{"v":1,"tool":"echo"}`), waitLimit); !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("%s: %v, want no responders", subj, err)
			}
		}
		if r := h.m.Dispatch(context.Background(), "nobody", subjects.DispatchRequest{V: 1, Tool: "echo"}); r.Error == nil || r.Error.Code != subjects.CodeNotFound {
			t.Errorf("in-process reply %+v", r.Error)
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		for _, subj := range []string{subjects.Dispatch("fx"), subjects.Relist("fx")} {
			msg, err := h.env.NC.Request(subj, []byte(`{"v":1,`), waitLimit)
			if err != nil {
				t.Fatal(err)
			}
			var r struct{ Error *subjects.Error }
			if err := json.Unmarshal(msg.Data, &r); err != nil || r.Error == nil || r.Error.Code != subjects.CodeBadRequest {
				t.Errorf("%s: reply %s", subj, msg.Data)
			}
		}
		rr := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: "widgets"})
		if rr.Error == nil || rr.Error.Code != subjects.CodeBadRequest {
			t.Errorf("relist of an unknown kind: %+v", rr.Error)
		}
	})
	// Still alive after all that.
	r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"still"}`)})
	if r.Error != nil {
		t.Errorf("after errors: %+v", r.Error)
	}
}

// A server that cannot be reached: unavailable with a redacted reason, dispatch unavailable,
// and the connector keeps retrying.
func TestUnreachableRedacted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken"
	sc := ServerConfig{
		Name: "down", Transport: TransportHTTP, URL: "http://127.0.0.1:1/mcp?key=" + secret,
		Headers: map[string]string{"Authorization": "Bearer hdr-" + secret},
		Secrets: []string{secret},
	}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("down"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	if strings.Contains(string(e.data), secret) || !strings.Contains(e.ev.Status.Reason, redact.Placeholder) {
		t.Errorf("reason not redacted: %s", e.data)
	}
	r := h.m.Dispatch(context.Background(), "down", subjects.DispatchRequest{V: 1, Tool: "x"})
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable {
		t.Errorf("dispatch: %+v", r.Error)
	}
	waitUntil(t, "a few retries", func() bool { return h.m.Statuses()["down"].Attempt >= 3 })
	if !h.m.Ready() {
		t.Error("Ready() is false after the first attempt")
	}
	if n := countStatus(rec.all(), subjects.StatusUnavailable); n != 1 {
		t.Errorf("%d unavailable events, want 1 (published on change only)", n)
	}
}
