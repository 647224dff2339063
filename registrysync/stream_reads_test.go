package registrysync

import (
	"bytes"
	"context"
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
