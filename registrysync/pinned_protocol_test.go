package registrysync

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// ServerConfig.ProtocolVersion pins the protocol. mcp-go honoured a pin to 2026-07-28 only as
// the version its server/discover asked for: when server/discover went unanswered, was refused
// or was answered by a legacy server, it fell back to initialize, and the connector published
// the server ready at 2025-11-25, the very protocol the pin said not to speak. A pin to an
// earlier version was sent in initialize, and whatever version the server answered with was
// taken. A pinned connection now speaks the pinned version or fails, saying why, and is tried
// again with the usual backoff.

// pinFailure waits for the first connect_failed status of server and checks that its reason
// says each of want.
func pinFailure(t *testing.T, h *harness, server string, want ...string) (*recorder, event) {
	t.Helper()
	rec := record(t, h.env, subjects.RegistryServer(server))
	e := rec.wait(0, "connect_failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	for _, w := range want {
		if !strings.Contains(e.ev.Status.Reason, w) {
			t.Errorf("status reason %q: want it to say %q", e.ev.Status.Reason, w)
		}
	}
	return rec, e
}

// TestPinnedModernDoesNotFallBack: a server pinned to 2026-07-28 whose server/discover goes
// unanswered (within ConnectTimeout, the whole of it: initialize is not sent after it), or is
// answered as a legacy server answers it, is not sent initialize: the connection fails, its
// reason says why, and it is tried again.
func TestPinnedModernDoesNotFallBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		connect time.Duration
		want    []string
	}{
		{"mute-discover", 3 * time.Second, []string{"did not answer server/discover (the MCP handshake) within 3s"}},
		{"legacy-lax", 10 * time.Second, []string{"server/discover answered without listing protocol version 2026-07-28"}},
		{"reject-always", 10 * time.Second, []string{"-32022"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			srv := &negotiationServer{mode: tc.mode}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			cfg := fastConfig(ServerConfig{Name: "pin", Transport: TransportHTTP, URL: ts.URL, ProtocolVersion: "2026-07-28", Kinds: []string{"tools"}})
			cfg.ConnectTimeout = tc.connect // the probe's bound, pinned to 2026-07-28
			h := run(t, nil, cfg)
			want := append([]string{"protocolVersion is pinned to 2026-07-28", "initialize was not sent"}, tc.want...)
			rec, first := pinFailure(t, h, "pin", want...)
			if first.ev.Status.RetryInMs <= 0 {
				t.Errorf("status %+v: want a retry", first.ev.Status)
			}
			// Tried again (an unchanged status is not published again): reject-always gets two
			// server/discover a connection, the others one.
			discovers := func() int {
				return len(slices.DeleteFunc(srv.posts(), func(p string) bool { return !strings.HasPrefix(p, "server/discover ") }))
			}
			for deadline := time.Now().Add(waitLimit); discovers() < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("%d server/discover POSTs within %s, want a connection tried again", discovers(), waitLimit)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if e := rec.all(); slices.ContainsFunc(e, isStatus(subjects.StatusReady, "")) {
				t.Errorf("ready published for a server that does not speak the pinned 2026-07-28")
			}
			if posts := srv.posts(); slices.ContainsFunc(posts, func(p string) bool { return strings.HasPrefix(p, "initialize ") }) {
				t.Errorf("initialize sent to a server pinned to 2026-07-28; POSTs: %q", posts)
			}
		})
	}
}

// TestPinnedModernNPMLegacy: server-everything (2025-11-25, it answers server/discover -32601)
// pinned to 2026-07-28 over stdio.
func TestPinnedModernNPMLegacy(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-everything")
	h := run(t, nil, fastConfig(ServerConfig{Name: "everything", Transport: TransportStdio, Command: "node",
		Args: []string{entry, "stdio"}, ProtocolVersion: "2026-07-28"}))
	pinFailure(t, h, "everything", "protocolVersion is pinned to 2026-07-28", "server/discover", "-32601", "initialize was not sent")
}

// TestPinnedLegacyVersionHeld: a pin to a version before 2026-07-28 sends no server/discover,
// and a server that answers initialize with another version than the pinned one is not
// connected at its version.
func TestPinnedLegacyVersionHeld(t *testing.T) {
	t.Parallel()
	t.Run("no-discover", func(t *testing.T) {
		t.Parallel()
		srv := &negotiationServer{mode: "legacy-lax"}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		h := run(t, nil, fastConfig(ServerConfig{Name: "pin", Transport: TransportHTTP, URL: ts.URL, ProtocolVersion: "2025-11-25", Kinds: []string{"tools"}}))
		rec := record(t, h.env, subjects.RegistryServer("pin"))
		ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
		if p := ready.ev.Status.Protocol; p != "2025-11-25" {
			t.Errorf("protocol = %q, want 2025-11-25", p)
		}
		if posts := srv.posts(); slices.ContainsFunc(posts, func(p string) bool { return strings.HasPrefix(p, "server/discover ") }) {
			t.Errorf("server/discover sent to a server pinned to 2025-11-25; POSTs: %q", posts)
		}
	})
	t.Run("echoed", func(t *testing.T) {
		// server-everything supports 2025-06-18, and answers it.
		t.Parallel()
		entry := npmServer(t, "server-everything")
		h := run(t, nil, fastConfig(ServerConfig{Name: "everything", Transport: TransportStdio, Command: "node",
			Args: []string{entry, "stdio"}, ProtocolVersion: "2025-06-18"}))
		rec := record(t, h.env, subjects.RegistryServer("everything"))
		ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
		if p := ready.ev.Status.Protocol; p != "2025-06-18" {
			t.Errorf("protocol = %q, want 2025-06-18", p)
		}
	})
	t.Run("other-answered", func(t *testing.T) {
		// The raw server answers initialize with 2025-11-25 whatever it is asked.
		t.Parallel()
		sc := rawServer(t, "other", "")
		sc.ProtocolVersion = "2025-06-18"
		h := run(t, nil, fastConfig(sc))
		pinFailure(t, h, "other", "protocolVersion is pinned to 2025-06-18", "answered initialize with protocol 2025-11-25")
	})
}

// TestPinnedModernSlowStart: a 2026-07-28 stdio server pinned to 2026-07-28 that answers
// server/discover only after more than half of ConnectTimeout (a JVM, npx, a loaded host) is
// connected at 2026-07-28. The probe's half of ConnectTimeout leaves the other half for
// initialize, which a pin to 2026-07-28 never sends: it failed every attempt, each starting
// the process anew, and the server never connected.
func TestPinnedModernSlowStart(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "slow", "fixture", startDelayEnv+"=16s")
	sc.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = 30 * time.Second // half of it, 15 s, is too short for the 16 s start
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("slow"))
	first := rec.wait(0, "ready or unavailable", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) || isStatus(subjects.StatusUnavailable, "*")(e)
	})
	if st := first.ev.Status; st.Status != subjects.StatusReady || st.Protocol != mcp.LATEST_PROTOCOL_VERSION {
		t.Errorf("first outcome %s %s %q (protocol %q), want ready at %s", st.Status, st.Code, st.Reason, st.Protocol, mcp.LATEST_PROTOCOL_VERSION)
	}
}
