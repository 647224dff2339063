package indexer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestOverlongToolNameSkipped: a snapshot holding a tool whose name is longer than a Badger key
// may be (65,000 bytes) made every write of the message fail: Follow ended with ErrStore on it,
// and a restarted replica died on the same message again. The tool is skipped like any other
// unusable definition; its siblings are kept and the replica follows on.
func TestOverlongToolNameSkipped(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, status("s", subjects.StatusReady),
		snapshot("s", "d", tool(strings.Repeat("x", 70_000), "a name no server sends"), tool("fine", "a fine tool")))
	c, err := Open(Config{Dir: filepath.Join(t.TempDir(), "r"), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	followErr := make(chan error, 1)
	go func() { followErr <- c.Follow(ctx, env.JS) }()
	defer func() {
		cancel()
		if err := <-followErr; err != nil {
			t.Errorf("follow: %v", err)
		}
	}()
	for range 2000 { // 10 s
		if c.Seq() >= seq && c.Ready() {
			break
		}
		select {
		case err := <-followErr:
			followErr <- err
			t.Fatalf("follow ended at seq %d of %d: %v", c.Seq(), seq, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if c.Seq() < seq {
		t.Fatalf("stuck at seq %d of %d", c.Seq(), seq)
	}
	if st := c.Stats(); st.Tools != 1 || st.BadItems != 1 {
		t.Errorf("tools %d, bad items %d; want 1 and 1", st.Tools, st.BadItems)
	}
	if _, _, ok := c.Lookup("s__fine"); !ok {
		t.Error("the sibling of the overlong name is missing")
	}
	waitSeq(t, c, publish(t, env.JS, snapshot("s", "d", tool("later", "still following"))))
}

// TestRevocationOfUnknownServer: an operator's revocation of a server the registry never
// announced is kept (the server's tools are revoked when it comes), but it makes no phantom
// server: servers listed it (status unknown, under the open policy) and Stats counted it, as a
// list_changed once did (TestListChangedOfUnknownServer).
func TestRevocationOfUnknownServer(t *testing.T) {
	env := natstest.Start(t)
	evs := append(demoEvents(t), revoke("ghost", []string{"haunt"}, nil), changed("ghost"))
	seq := publish(t, env.JS, evs...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	want := r.Stats().Servers
	for _, s := range r.Servers(context.Background(), subjects.ServersRequest{V: 1}).Servers {
		if s.Name == "ghost" {
			t.Errorf("phantom server listed: %+v", s)
		}
	}
	if want != 4 {
		t.Errorf("stats count %d servers, want the 4 announced", want)
	}
	// The server comes: listed, its revoked tool refused.
	seq = publish(t, env.JS, status("ghost", subjects.StatusReady), snapshot("ghost", "now real", tool("haunt", "haunt a house"), tool("boo", "say boo")))
	waitSeq(t, r.Catalog, seq)
	listed := false
	for _, s := range r.Servers(context.Background(), subjects.ServersRequest{V: 1}).Servers {
		listed = listed || s.Name == "ghost" && s.Tools == 2
	}
	if !listed {
		t.Error("ghost not listed once announced")
	}
	det := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"ghost__haunt"}})
	if len(det.Tools) != 1 || det.Tools[0].State != subjects.StateRevoked {
		t.Errorf("ghost__haunt revoked before its server came: %+v %+v", det.Tools, det.Error)
	}
}

// Tools revoked by name are bounded per server (the server's record is one Badger value, read
// and written whole on every revocation): past subjects.MaxRevokedTools every tool of the
// server is revoked instead, as the executor's view does.
func TestRevokedNamesBounded(t *testing.T) {
	env := natstest.Start(t)
	names := make([]string, subjects.MaxRevokedTools)
	for i := range names {
		names[i] = fmt.Sprintf("gone%d", i)
	}
	evs := append(demoEvents(t), revoke("kb", names, nil), revoke("kb", []string{"one-more", strings.Repeat("x", subjects.MaxToolNameBytes+1)}, nil))
	seq := publish(t, env.JS, evs...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	if n := len(r.server("kb").rec.Revoked); n > subjects.MaxRevokedTools {
		t.Errorf("%d names kept, want at most %d", n, subjects.MaxRevokedTools)
	}
	det := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"kb__search_knowledge_base"}})
	if len(det.Tools) != 1 || det.Tools[0].State != subjects.StateRevoked {
		t.Errorf("kb__search_knowledge_base past the limit: %d tools, %+v, want it revoked", len(det.Tools), det.Error)
	}
}

// lineCounter counts the lines a logger writes (zerolog writes one per call).
type lineCounter struct{ n atomic.Int64 }

func (w *lineCounter) Write(p []byte) (int, error) { w.n.Add(1); return len(p), nil }

// TestManyUnusableItemsLogBounded: a registry message is at most 8 MB, which holds about four
// million unusable items ("0,"). Each was logged on its own line: one hostile snapshot wrote
// 4.2 million lines (775 MB) to the replica's log, again at every rebuild by replay. A few are
// logged, then one line counts the rest; all are counted in Stats.BadItems and the list's
// rejections.
func TestManyUnusableItemsLogBounded(t *testing.T) {
	const n = 20_000
	var b strings.Builder
	b.WriteString(`{"v":1,"type":"snapshot","server":"h","kind":"tools","fingerprint":"f","listedAt":"2026-08-01T12:00:00Z","pages":1,"items":[`)
	b.WriteString(`{"name":"kept","inputSchema":{"type":"object"}}`)
	for range n {
		b.WriteString(",0")
	}
	b.WriteString(`]}`)
	lines := &lineCounter{}
	c, err := Open(Config{InMemory: true, Log: zerolog.New(lines), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.applyMsg(1, subjects.RegistrySnapshot("h", subjects.KindTools), []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Seq != 1 || st.Tools != 1 || st.BadItems != n {
		t.Errorf("seq %d, tools %d, bad items %d; want 1, 1, %d", st.Seq, st.Tools, st.BadItems, n)
	}
	if got := lines.n.Load(); got > 2*MaxRejected {
		t.Errorf("%d log lines for one snapshot of %d unusable items, want at most %d", got, n, 2*MaxRejected)
	}
	km := c.servers["h"].kinds[subjects.KindTools]
	if len(km.Rejected)+km.RejectedMore != n {
		t.Errorf("%d rejections kept and %d counted, want %d in all", len(km.Rejected), km.RejectedMore, n)
	}
}
