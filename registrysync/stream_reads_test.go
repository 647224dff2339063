package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStartOfManyServersBoundsStreamReads: at start every connector reads the registry stream's
// last events of its server (9 JetStream API requests per server of one tool, one at a time),
// all connectors at once: a registrysync of n servers had n requests waiting at once in the NATS
// server's JetStream API queue (all 1,000 of a start of 1,000, measured). Past that queue's
// limit (10,000 by default, shared by every client of the server) the server drops every
// request waiting, and each connector waited publishTimeout (10 s) for its answer, logged
// "cannot read the registry stream (is it declared?)" and tried again later, all together
// again (400 servers against a queue limit of 100: ready after 43 s instead of 2). A Manager
// keeps at most maxStreamReads of its reads in flight.
//
// The test's Manager has reads turns instead of maxStreamReads (same semaphore, same code
// paths), and n is as many times more: a start of 600 servers against 256 turns took a minute
// under -race on 2 cores; unbounded, about n reads are in flight at once either way.
func TestStartOfManyServersBoundsStreamReads(t *testing.T) {
	const reads = 64
	const n = 5 * reads // more than reads, few enough for -race on 2 cores
	env := natstest.Start(t)
	srv := server.NewMCPServer("fake", "1.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("t", mcp.WithDescription("a tool")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)

	// The reads in flight, as NATS routes them: a request seen and its answer not yet (one
	// connection gets both, in the order the server sent them, into one channel).
	seen := make(chan *nats.Msg, 1<<16)
	mon := env.Connect(t)
	reqs, err := mon.ChanSubscribe("$JS.API.STREAM.MSG.GET."+subjects.RegistryStream, seen)
	if err != nil {
		t.Fatal(err)
	}
	answers, err := mon.ChanSubscribe("_INBOX.>", seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waiting := map[string]bool{}
	requests, most := 0, 0
	stop := make(chan struct{})
	var counting sync.WaitGroup
	counting.Go(func() {
		for {
			select {
			case <-stop:
				return
			case m := <-seen:
				mu.Lock()
				if m.Sub == reqs {
					requests++
					waiting[m.Reply] = true
					most = max(most, len(waiting))
				} else {
					delete(waiting, m.Subject)
				}
				mu.Unlock()
			}
		}
	})
	defer counting.Wait()
	defer close(stop)

	var scs []ServerConfig
	for i := range n {
		scs = append(scs, ServerConfig{Name: fmt.Sprintf("s%04d", i), Transport: "http", URL: fmt.Sprintf("%s/mcp?i=%d", ts.URL, i)})
	}
	h := runWith(t, env, fastConfig(scs...), func(m *Manager) {
		if cap(m.reads) != maxStreamReads {
			t.Errorf("a Manager has %d registry stream read turns, want maxStreamReads (%d)", cap(m.reads), maxStreamReads)
		}
		m.reads = make(chan struct{}, reads)
	})
	// (Generous: 600 connections and lists take a while under -race on a busy machine.)
	for deadline := time.Now().Add(5 * time.Minute); !h.m.Ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not every server's first connection was over within 5 minutes")
		}
	}
	ready := 0
	for _, st := range h.m.Statuses() {
		if st.Status == subjects.StatusReady {
			ready++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	dropped, _ := answers.Dropped()
	if d, _ := reqs.Dropped(); d > 0 {
		dropped += d
	}
	t.Logf("%d of %d servers ready; %d registry stream reads, at most %d in flight; %d left, %d dropped", ready, n, requests, most, len(waiting), dropped)
	if ready != n {
		t.Errorf("%d of %d servers ready", ready, n)
	}
	// (The monitor may see a request before the answer that freed its turn: the server writes
	// to each connection on its own. Unbounded, all n were in flight at once.) A read past its
	// deadline gives its turn back while the NATS server still holds its request, and is made
	// again: on a machine so loaded that reads time out (CI under load: 6,280 reads for 5,400,
	// 460 in flight), each read beyond the 9 per server of a quiet start may have left one.
	abandoned := max(0, requests-9*n)
	if bound := reads + reads/8 + abandoned; most > bound {
		t.Errorf("%d registry stream reads in flight at once, want about %d at most (the NATS server's JetStream API queue drops every request waiting past its limit)", most, reads)
	}
}

// lockedLog is a log sink for tests that look for a message.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestStreamReadTurnWaitNotCountedInDeadline: a read of the registry stream had publishTimeout
// (10 s) from when it began to wait for one of the Manager's maxStreamReads turns, not from when
// its turn came. A start of many servers (1,000 under -race on 2 cores: reads answered in 2-5 s,
// turns coming after 5-7 s) failed the reads of the connectors last in line, 528 times ("cannot
// read the registry stream (is it declared?)", at error level), each connector reading all its
// server's events again after its backoff, and the storm of re-lists that followed a
// list_changed from every server failed theirs ("cannot read the last list_changed"), each kind
// listed again later. Here every turn is taken for longer than publishTimeout: once they are
// given back, the connector reads and gets ready, with no read failed.
func TestStreamReadTurnWaitNotCountedInDeadline(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	url := httpFixture(t, newFixture(fixtureOptions{}))
	var logs lockedLog
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), &logs)).Level(zerolog.InfoLevel)
	h := &harness{env: env, m: New(env.JS, env.NC, fastConfig(ServerConfig{Name: "late", URL: url}), log), done: make(chan error, 1)}
	for range cap(h.m.reads) { // every turn taken, as by the reads of the servers before
		h.m.reads <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	rec := record(t, env, subjects.RegistryServer("late"))

	time.Sleep(publishTimeout + 500*time.Millisecond)
	for range cap(h.m.reads) {
		<-h.m.reads
	}
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if strings.Contains(logs.String(), "cannot read the registry stream") {
		t.Errorf("a read failed while it waited for its turn:\n%s", logs.String())
	}
}

// TestChangedWaitsDoesNotWaitForATurnPastPublishTimeout: before it stores a ListChanged for a
// notification, the notifier reads the stream (changedWaits) to see whether the one it stored
// before still waits for its answer; a read that fails says no, and the ListChanged is stored.
// Once reads had publishTimeout from when their turn came, the notifier waited for a turn as
// long as its connector ran, holding pubMu: with every turn taken (a start or a list_changed
// burst of hundreds of servers, JetStream slow to answer), a notification that came after
// another connector answered the last ListChanged (consumers fresh) had no ListChanged stored
// until the turns came, while the server's list had changed: the staleness window grew with the
// queue of reads, where it had publishTimeout at most. The read, turn included, has
// publishTimeout.
func TestChangedWaitsDoesNotWaitForATurnPastPublishTimeout(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	srv := newFixture(fixtureOptions{})
	cfg := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}})
	cfg.Debounce = time.Hour // the connector's own re-list never answers by itself
	rec := record(t, env, subjects.RegistryServer("fx"))
	h := run(t, env, cfg)
	notified := make(chan subjects.Kind, 16)
	hook := func(server string, kind subjects.Kind) { notified <- kind }
	h.m.afterNotified.Store(&hook)
	waitUntil(t, "fx ready", h.m.Ready)
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	// S1 waits for its answer.
	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	select {
	case <-notified:
	case <-time.After(waitLimit):
		t.Fatalf("the first notification was not handled within %s", waitLimit)
	}
	s1 := rec.wait(first.seq, "list_changed S1", isChanged(subjects.KindTools))
	// Another connector of fx answers it: consumers hold the tools fresh again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := json.Marshal(subjects.Snapshot{V: subjects.Version, Type: subjects.EventSnapshot, Server: "fx",
		Kind: subjects.KindTools, Fingerprint: "0123456789abcdef", ListedAt: time.Now().UTC(), Items: []json.RawMessage{}})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := env.JS.Publish(ctx, subjects.RegistrySnapshot("fx", subjects.KindTools), data)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence <= s1.seq {
		t.Fatalf("the answer is #%d, before S1 #%d", ack.Sequence, s1.seq)
	}

	// Every turn taken, as by the reads of hundreds of servers, for longer than publishTimeout.
	free := takeEveryTurn(t, h.m)
	// The server's list changes: consumers must be stale again.
	srv.AddTool(mcp.NewTool("added", mcp.WithDescription("Added after the answer.")), nil)
	s2 := rec.wait(ack.Sequence, "a list_changed for the change after the answer", isChanged(subjects.KindTools))
	free()
	t.Logf("S1 #%d, answer #%d, S2 #%d", s1.seq, ack.Sequence, s2.seq)
}

// TestRelistWaitsForItsTurnWithoutPubMu: a re-list reads the stream's last ListChanged before it
// lists (changedFromStream), under pubMu, which the notifier needs to store a ListChanged. Once
// that read waited for its turn as long as the connector ran, a re-list begun while every turn
// was taken (a periodic resync or a re-list request among hundreds of servers reading) held pubMu
// all that time, and a notification of a change to a list consumers held fresh had no
// ListChanged stored until the turns came: the staleness window grew with the queue of reads.
// The re-list waits for its turn before it takes pubMu.
func TestRelistWaitsForItsTurnWithoutPubMu(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	srv := newFixture(fixtureOptions{})
	cfg := fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}})
	cfg.Debounce = time.Hour // the connector's own re-list never comes by itself
	rec := record(t, env, subjects.RegistryServer("fx"))
	h := run(t, env, cfg)
	waitUntil(t, "fx ready", h.m.Ready)
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

	// Every turn taken, as by the reads of hundreds of servers, for longer than publishTimeout.
	free := takeEveryTurn(t, h.m)
	// A re-list begins (a request: its own deadline ends long before the loop's re-list does)
	// and waits for a turn.
	rctx, rcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer rcancel()
	h.m.Relist(rctx, "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	// The server's list changes: consumers must be stale.
	srv.AddTool(mcp.NewTool("added", mcp.WithDescription("Added while the re-list waits.")), nil)
	s := rec.wait(first.seq, "a list_changed for the change", isChanged(subjects.KindTools))
	free()
	// A re-list then answers it (the one that waited began before the change: it is dropped).
	if r := h.m.Relist(context.Background(), "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools}); r.Error != nil {
		t.Fatalf("relist: %+v", r.Error)
	}
	rec.wait(s.seq, "the changed list", isSnapshot(subjects.KindTools, func(sn *subjects.Snapshot) bool { return hasName(t, sn, "added") }))
}

// takeEveryTurn takes every registry stream read turn of m and returns what gives them back
// (once; also at the test's cleanup, which runs before the Manager's stop).
func takeEveryTurn(t *testing.T, m *Manager) (free func()) {
	for range cap(m.reads) {
		m.reads <- struct{}{}
	}
	var once sync.Once
	free = func() {
		once.Do(func() {
			for range cap(m.reads) {
				<-m.reads
			}
		})
	}
	t.Cleanup(free)
	return free
}
