package registrysync

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSpuriousListChangedNotAmplified: a server that sends tools/list_changed a little slower
// than the debounce, forever, while its list never changes, had every notification stored as a
// ListChanged event and a whole copy of its unchanged list as a Snapshot (2 events, one the size
// of the list, per ~60-byte notification, in a stream that keeps everything and that every
// replica replays). A kind whose notifications keep proving spurious is re-listed with a growing
// delay: the events grow with the logarithm of the flood's length, not with it.
func TestSpuriousListChangedNotAmplified(t *testing.T) {
	var lists atomic.Int64
	hooks := &server.Hooks{}
	hooks.AddBeforeListTools(func(context.Context, any, *mcp.ListToolsRequest) { lists.Add(1) })
	srv := server.NewMCPServer("spurious", "1", server.WithToolCapabilities(true), server.WithHooks(hooks))
	srv.AddTool(mcp.NewTool("t"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	cfg := fastConfig(ServerConfig{Name: "sp", URL: httpFixture(t, srv), Kinds: []string{"tools"}})
	cfg.BackoffMax = time.Minute // the delay's cap, far beyond this test: only the growth counts
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("sp"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	lists0 := lists.Load()

	const n = 40
	for range n {
		srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
		// Pacing, not synchronization: the notifications come slower than the debounce.
		time.Sleep(2 * cfg.Debounce)
	}
	// The last stale period ends with a snapshot.
	waitUntil(t, "a snapshot after the last ListChanged", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].ev.Snapshot != nil && evs[len(evs)-1].seq > ready.seq
	})
	changed, snaps := 0, 0
	for _, e := range rec.all() {
		if e.seq <= ready.seq {
			continue
		}
		switch {
		case e.ev.ListChanged != nil:
			changed++
		case e.ev.Snapshot != nil:
			snaps++
		}
	}
	relists := lists.Load() - lists0
	t.Logf("%d notifications: %d ListChanged, %d snapshots, %d tools/list", n, changed, snaps, relists)
	if changed == 0 || snaps == 0 {
		t.Fatalf("the notifications were not followed (%d ListChanged, %d snapshots)", changed, snaps)
	}
	// The delay doubles from the third spurious re-list on (30 ms, 60 ms, ...): a dozen cover
	// minutes. A list a notification overtakes is not published (up to maxSkips in a row) and
	// re-listed after the same delay.
	const bound = 14
	if changed > bound || snaps > bound {
		t.Errorf("%d spurious notifications made %d ListChanged events and %d snapshots: want at most %d each",
			n, changed, snaps, bound)
	}
	if relists > (maxSkips+1)*bound {
		t.Errorf("%d spurious notifications made %d re-lists: want at most %d", n, relists, (maxSkips+1)*bound)
	}
}
