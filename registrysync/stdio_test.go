package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/subjects"
)

// A stdio server (the test binary) on both protocol eras: list_changed leads to a ListChanged
// event and a new snapshot; a killed process makes the server unavailable, then ready again
// with a new process; a second server is not affected; when Run returns the child is gone.
func TestStdioListChangedKillRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, protocol string }{
		{"modern", ""},
		{"legacy", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			other := httpFixture(t, newFixture(fixtureOptions{}))
			sc := stdioServer(t, "child", "fixture")
			sc.ProtocolVersion = tc.protocol
			cfg := fastConfig(sc, ServerConfig{Name: "other", Transport: TransportHTTP, URL: other})
			h := run(t, nil, cfg)
			rec := record(t, h.env, subjects.RegistryServer("child"))
			otherRec := record(t, h.env, subjects.RegistryServer("other"))

			ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			wantProto := tc.protocol
			if wantProto == "" {
				wantProto = mcp.ProtocolVersion20260728
			}
			if ready.ev.Status.Protocol != wantProto {
				t.Errorf("protocol = %q, want %q", ready.ev.Status.Protocol, wantProto)
			}
			first := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
			if !hasName(t, first.ev.Snapshot, "exit") || !hasName(t, first.ev.Snapshot, "raw_oneof") {
				t.Errorf("tools = %v", names(t, first.ev.Snapshot))
			}
			otherReady := otherRec.wait(0, "other ready", isStatus(subjects.StatusReady, ""))

			// list_changed
			r := dispatch(t, h, "child", subjects.DispatchRequest{V: 1, Tool: "drop", Arguments: json.RawMessage(`{"name":"echo"}`)})
			if r.Error != nil {
				t.Fatalf("drop: %+v", r.Error)
			}
			changed := rec.wait(ready.seq, "tools list_changed", isChanged(subjects.KindTools))
			rec.wait(changed.seq, "snapshot without echo", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
				return !hasName(t, s, "echo") && hasName(t, s, "exit")
			}))

			// kill: the exit tool ends the process before it answers.
			pid1 := childPid(t, h)
			r = dispatch(t, h, "child", subjects.DispatchRequest{V: 1, Tool: "exit"})
			if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
				t.Errorf("exit: %+v %s, want outcome_unknown", r.Error, r.Result)
			}
			lost := rec.wait(ready.seq, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
			again := rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
			// The new process has echo again: a new snapshot (no ListChanged needed).
			rec.wait(lost.seq, "snapshot with echo", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
				return hasName(t, s, "echo")
			}))
			pid2 := childPid(t, h)
			if pid2 == pid1 {
				t.Errorf("same pid %d after restart", pid1)
			}
			_ = again

			// The other server never noticed.
			for _, e := range otherRec.all() {
				if e.seq > otherReady.seq && e.ev.Status != nil {
					t.Errorf("other server status changed: %s", e)
				}
			}
			if st := h.m.Statuses()["other"]; st.Status != subjects.StatusReady {
				t.Errorf("other status = %+v", st)
			}

			// On return of Run the child is gone.
			h.stop(t)
			if err := syscall.Kill(pid2, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("child %d still exists after Run returned (kill 0: %v)", pid2, err)
			}
		})
	}
}

func childPid(t *testing.T, h *harness) int {
	t.Helper()
	var pid int
	waitUntil(t, "pid answer", func() bool {
		r := h.m.Dispatch(context.Background(), "child", subjects.DispatchRequest{V: 1, Tool: "pid"})
		if r.Error != nil {
			return false
		}
		n, err := strconv.Atoi(resultText(t, r.Result))
		pid = n
		return err == nil
	})
	return pid
}

// The bundled demo server over stdio with its control file: hiding a tool at run time sends
// list_changed; the connector publishes ListChanged and a snapshot without it.
func TestStdioDemoServerControlFile(t *testing.T) {
	t.Parallel()
	control := filepath.Join(t.TempDir(), "control.json")
	sc := stdioServer(t, "ticketing", "demo:ticketing", "MCPSTREAM_TEST_CONTROL="+control)
	cfg := fastConfig(sc)
	// The cache hints come with 2026-07-28: server/discover is given 20 s (half of this), as
	// a test child under -race on a loaded machine took ~8 s to answer it.
	cfg.ConnectTimeout = 40 * time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("ticketing"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "createIssue") {
		t.Fatalf("tools = %v", names(t, snap))
	}
	if snap.TTLMs == nil || snap.CacheScope != subjects.ScopePrivate {
		t.Errorf("cache hints: ttl %v scope %q (ticketing says 30 s private)", snap.TTLMs, snap.CacheScope)
	}
	writeControl(t, control, demoservers.Control{Hide: []string{"createIssue"}})
	changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
	rec.wait(changed.seq, "snapshot without createIssue", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
		return !hasName(t, s, "createIssue")
	}))
}

func writeControl(t *testing.T, path string, c demoservers.Control) {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Misbehaving servers (demoservers' hostile modes), all in one Manager: each gets a clear code
// and the connectors keep running.
func TestHostileServers(t *testing.T) {
	t.Parallel()
	// The slow mode never answers tools/list: it gets its own manager with a short list
	// timeout. The others keep the normal one — a 1 MiB description takes a while to list under
	// the race detector on a loaded machine, and must not be cut off by the slow mode's bound.
	cfg, slowCfg := fastConfig(), fastConfig()
	cfg.MaxPages = 5
	slowCfg.ListTimeout = 2 * time.Second
	for _, mode := range demoservers.HostileModes() {
		if mode == demoservers.HostileSlow {
			slowCfg.Servers = append(slowCfg.Servers, stdioServer(t, mode, "hostile:"+mode))
			continue
		}
		cfg.Servers = append(cfg.Servers, stdioServer(t, mode, "hostile:"+mode))
	}
	// Separate servers too: both managers answer the dispatch and relist subjects.
	regular, slow := run(t, nil, cfg), run(t, nil, slowCfg)

	expectStatus := map[string]string{
		demoservers.HostileMalformedJSON:   subjects.CodeMalformedResponse,
		demoservers.HostileEndlessCursor:   subjects.CodeTooManyPages,
		demoservers.HostileSlow:            subjects.CodeListFailed,
		demoservers.HostileInvalidSchema:   "",
		demoservers.HostileHugeDescription: "",
		demoservers.HostileOddNames:        "",
	}
	for _, mode := range demoservers.HostileModes() {
		h := regular
		if mode == demoservers.HostileSlow {
			h = slow
		}
		t.Run(mode, func(t *testing.T) {
			rec := record(t, h.env, subjects.RegistryServer(mode))
			code, ok := expectStatus[mode]
			if !ok {
				t.Fatalf("new hostile mode %q: add its expectation to this test", mode)
			}
			if code != "" {
				e := rec.wait(0, "unavailable "+code, isStatus(subjects.StatusUnavailable, code))
				t.Logf("%s: %s", mode, e.ev.Status.Reason)
				// The connector keeps retrying the list on the live session.
				waitUntil(t, "a retry", func() bool { return h.m.Statuses()[mode].At.After(e.ev.Status.At) })
				return
			}
			snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			got := names(t, snap)
			rejected := map[string]string{}
			for _, r := range snap.Rejected {
				rejected[r.Name] = r.Code
			}
			switch mode {
			case demoservers.HostileInvalidSchema:
				if !slices.Equal(got, []string{"echo"}) {
					t.Errorf("items = %v, want [echo]", got)
				}
				for _, n := range []string{"type_is_number", "schema_is_string", "properties_is_array"} {
					if rejected[n] != subjects.CodeInvalidSchema {
						t.Errorf("%s rejected as %q, want invalid_schema (%+v)", n, rejected[n], snap.Rejected)
					}
				}
			case demoservers.HostileHugeDescription:
				if !slices.Equal(got, []string{"echo"}) || rejected["huge_description"] != subjects.CodeDefinitionTooLarge {
					t.Errorf("items = %v, rejected = %+v", got, snap.Rejected)
				}
				// The well-behaved tool still works.
				r := dispatch(t, h, mode, subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
				if r.Error != nil || resultText(t, r.Result) != "hi" {
					t.Errorf("echo: %+v %s", r.Error, r.Result)
				}
			case demoservers.HostileOddNames:
				if !slices.Equal(got, demoservers.OddToolNames) || len(snap.Rejected) != 0 {
					t.Errorf("items = %q, rejected = %+v; want every odd name accepted", got, snap.Rejected)
				}
			}
		})
	}
}

// A stdio child gets a minimal environment plus its configured Env, not this process's
// variables (other servers' credentials), unless InheritEnv is set.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("MCPSTREAM_TEST_PARENT_SECRET", "parent-value")
	isolated := stdioServer(t, "isolated", "fixture", "CONFIGURED=configured-value")
	isolated.Kinds = []string{"tools"}
	inherit := stdioServer(t, "inherit", "fixture")
	inherit.InheritEnv = true
	h := run(t, nil, fastConfig(isolated, inherit))
	getenv := func(server, name string) string {
		var out string
		waitUntil(t, server+" answers", func() bool {
			args, _ := json.Marshal(map[string]string{"name": name})
			r := h.m.Dispatch(context.Background(), server, subjects.DispatchRequest{V: 1, Tool: "getenv", Arguments: args})
			if r.Error != nil {
				return false
			}
			out = resultText(t, r.Result)
			return true
		})
		return out
	}
	for _, tc := range []struct{ server, name, want string }{
		{"isolated", "MCPSTREAM_TEST_PARENT_SECRET", "="},
		{"isolated", "CONFIGURED", "=configured-value"},
		{"isolated", "PATH", "=" + os.Getenv("PATH")},
		{"inherit", "MCPSTREAM_TEST_PARENT_SECRET", "=parent-value"},
	} {
		if got := getenv(tc.server, tc.name); got != tc.want {
			t.Errorf("%s: %s %q, want %q", tc.server, tc.name, got, tc.want)
		}
	}
}

// TestResultSecretsRedacted: a server that echoes its own credential (here a getenv tool and
// echo) hands the caller [redacted], not the value.
func TestResultSecretsRedacted(t *testing.T) {
	sc := stdioServer(t, "leaky", "fixture", "SERVICE_TOKEN=tok-5ecret-value")
	sc.Kinds = []string{"tools"}
	h := run(t, nil, fastConfig(sc))
	call := func(tool, args string) subjects.DispatchReply {
		var r subjects.DispatchReply
		waitUntil(t, "leaky answers", func() bool {
			r = h.m.Dispatch(context.Background(), "leaky", subjects.DispatchRequest{V: 1, Tool: tool, Arguments: json.RawMessage(args)})
			return r.Error == nil || r.Error.Code != subjects.CodeUnavailable
		})
		return r
	}
	if r := call("getenv", `{"name":"SERVICE_TOKEN"}`); r.Error != nil || resultText(t, r.Result) != "=[redacted]" {
		t.Errorf("getenv: %+v %s", r.Error, r.Result)
	}
	r := call("echo", `{"text":"my token is tok-5ecret-value"}`)
	if r.Error != nil || strings.Contains(string(r.Result), "tok-5ecret-value") || !strings.Contains(string(r.Result), "[redacted]") {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
	if r := call("echo", `{"text":"harmless"}`); r.Error != nil || resultText(t, r.Result) != "harmless" {
		t.Errorf("echo harmless: %+v %s", r.Error, r.Result)
	}
}

// TestDispatchFramesOneLine: arguments that arrive pretty-printed (newlines are JSON whitespace)
// still travel as one stdio frame; a call waiting for its answer gets it.
func TestDispatchFramesOneLine(t *testing.T) {
	sc := stdioServer(t, "fx", "fixture")
	sc.Kinds = []string{"tools"}
	h := run(t, nil, fastConfig(sc))
	var r subjects.DispatchReply
	waitUntil(t, "fx answers", func() bool {
		r = h.m.Dispatch(context.Background(), "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage("{\n  \"text\":\r\n \"multi\\nline\"\n}")})
		return r.Error == nil || r.Error.Code != subjects.CodeUnavailable
	})
	if r.Error != nil || resultText(t, r.Result) != "multi\nline" {
		t.Fatalf("got %+v %s", r.Error, r.Result)
	}
}
