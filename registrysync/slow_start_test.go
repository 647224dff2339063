package registrysync

import (
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// mcp-go opens a connection with server/discover (2026-07-28) and falls back to initialize
// (2025-11-25) when no answer comes within its probe timeout, 5 s by default. A stdio server
// slow to start (npx fetching its package, a JVM, a loaded host; in CI a test binary under
// -race took 8 s) answered server/discover after that, and was spoken to at 2025-11-25 for the
// life of its process: no cache hints, no subscriptions/listen. The probe now waits half of
// ConnectTimeout (discoverTimeout).

// startDelayEnv makes a test server child sleep that long (a time.ParseDuration string) before
// it reads its stdin, as a server slow to start does.
const startDelayEnv = "MCPSTREAM_TEST_START_DELAY"

// slowStart sleeps for startDelayEnv, if set (the child's start, not a synchronisation).
func slowStart() {
	if d, err := time.ParseDuration(os.Getenv(startDelayEnv)); err == nil {
		time.Sleep(d)
	}
}

// TestStdioSlowStartNegotiatesModern: a 2026-07-28 stdio server that answers server/discover
// only after 6 s (more than mcp-go's default probe, well under half of ConnectTimeout) is
// spoken to at 2026-07-28.
func TestStdioSlowStartNegotiatesModern(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "slow", "fixture", startDelayEnv+"=6s")
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = 40 * time.Second // probe 20 s: room for a loaded machine's own delay
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("slow"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if p := ready.ev.Status.Protocol; p != mcp.LATEST_PROTOCOL_VERSION {
		t.Errorf("protocol = %q, want %q: a server slow to start fell back to the legacy handshake", p, mcp.LATEST_PROTOCOL_VERSION)
	}
}

// TestStdioIgnoredDiscoverFallsBack: a legacy stdio server that never answers server/discover
// (it ignores methods it does not know) still connects with initialize within ConnectTimeout:
// the probe leaves it the other half.
func TestStdioIgnoredDiscoverFallsBack(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rawServer(t, "mute", "nodiscover"))
	cfg.ConnectTimeout = 12 * time.Second // probe 6 s, then 6 s for initialize
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("mute"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if p := ready.ev.Status.Protocol; p != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Errorf("protocol = %q, want %q", p, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
}
