package registrysync

import (
	"context"
	"fmt"
	"strings"
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
// replica replays). Now each ListChanged is answered by a small Confirmed event (afterSeq: its
// sequence) and no snapshot is stored: what a notification costs the stream does not depend
// on the list's size. (The gentle delay of such re-lists is TestRelistDelay's.)
func TestSpuriousListChangedNotAmplified(t *testing.T) {
	var lists atomic.Int64
	hooks := &server.Hooks{}
	hooks.AddBeforeListTools(func(context.Context, any, *mcp.ListToolsRequest) { lists.Add(1) })
	srv := server.NewMCPServer("spurious", "1", server.WithToolCapabilities(true), server.WithHooks(hooks))
	// A list of some size: a copy of it per notification would show in the bytes stored.
	for i := range 50 {
		srv.AddTool(mcp.NewTool(fmt.Sprintf("t%d", i), mcp.WithDescription(strings.Repeat("a tool of some size ", 20))),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
	cfg := fastConfig(ServerConfig{Name: "sp", URL: httpFixture(t, srv), Kinds: []string{"tools"}})
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("sp"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	lists0 := lists.Load()

	const n = 40
	for range n {
		srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
		// Pacing, not synchronization: the notifications come slower than the debounce.
		time.Sleep(2 * cfg.Debounce)
	}
	// The last stale period ends with a confirmation.
	waitUntil(t, "a confirmation after the last ListChanged", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].ev.Confirmed != nil && evs[len(evs)-1].seq > ready.seq
	})
	changed, confirmed, snaps, bytes := 0, 0, 0, 0
	var waiting uint64 // the ListChanged without an answer yet
	for _, e := range rec.all() {
		if e.seq <= ready.seq {
			continue
		}
		bytes += len(e.data)
		switch {
		case e.ev.ListChanged != nil:
			changed++
			if waiting != 0 {
				t.Errorf("ListChanged #%d stored while #%d waits for its answer", e.seq, waiting)
			}
			waiting = e.seq
		case e.ev.Confirmed != nil:
			confirmed++
			if e.ev.Confirmed.AfterSeq != waiting || e.ev.Confirmed.Fingerprint != snap.ev.Snapshot.Fingerprint {
				t.Errorf("confirmed #%d %s, want afterSeq %d and the snapshot's fingerprint", e.seq, e.data, waiting)
			}
			waiting = 0
		case e.ev.Snapshot != nil:
			snaps++
		}
	}
	relists := lists.Load() - lists0
	t.Logf("%d notifications: %d ListChanged, %d confirmed, %d snapshots, %d bytes, %d tools/list; the list is %d bytes",
		n, changed, confirmed, snaps, bytes, relists, len(snap.data))
	// The last ListChanged may still wait for its answer when the recorder is read.
	if changed == 0 || snaps != 0 || confirmed < changed-1 {
		t.Fatalf("%d ListChanged, %d confirmed, %d snapshots: want every ListChanged answered by a confirmation, no snapshot",
			changed, confirmed, snaps)
	}
	if per := bytes / changed; per > 1024 {
		t.Errorf("%d bytes stored per notification, want a few hundred (no copy of the %d-byte list)", per, len(snap.data))
	}
	if changed > n {
		t.Errorf("%d notifications made %d ListChanged events", n, changed)
	}
}
