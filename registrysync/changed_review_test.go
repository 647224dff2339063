package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// ackDropProxy is a loopback TCP proxy for one NATS client that lets the client's first n
// publishes to subject reach the server (the stream stores the first, de-duplicates the
// others) but drops the answers to them, the PubAcks: the publisher's requests time out
// although the message is on the stream, as when a PubAck is lost on the way back.
type ackDropProxy struct {
	ln      net.Listener
	subject string
	n       int
	dropped atomic.Int32
	// reads is how many stream reads naming subject, made once n PubAcks were dropped, also
	// lose their answer (the read times out, as when NATS is unreachable a while).
	reads   int
	mu      sync.Mutex
	conns   []net.Conn
	replies map[string]bool // the reply subjects of those publishes: true once answered
}

func startAckDropProxy(t *testing.T, target, subject string, n int) *ackDropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ackDropProxy{ln: ln, subject: subject, n: n, replies: map[string]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { p.frames(c, s, false); c.Close() }()
			go func() { p.frames(s, c, true); s.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

// frames copies NATS protocol frames from src to dst. From the client (toServer) it notes the
// reply subjects of the first p.n PUB or HPUB to p.subject; from the server it leaves out the
// first MSG to each.
func (p *ackDropProxy) frames(dst io.Writer, src io.Reader, toServer bool) {
	r := bufio.NewReader(src)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		fields := bytes.Fields(line)
		var payload []byte
		if len(fields) >= 3 {
			op := string(fields[0])
			if op == "PUB" || op == "HPUB" || op == "MSG" || op == "HMSG" {
				n, err := strconv.Atoi(string(fields[len(fields)-1]))
				if err != nil {
					return
				}
				payload = make([]byte, n+2) // and its \r\n
				if _, err := io.ReadFull(r, payload); err != nil {
					return
				}
			}
			// PUB subject [reply] n; HPUB subject [reply] h n.
			withReply := op == "PUB" && len(fields) == 4 || op == "HPUB" && len(fields) == 5
			p.mu.Lock()
			if toServer && withReply && string(fields[1]) == p.subject && len(p.replies) < p.n {
				p.replies[string(fields[2])] = false
			}
			if toServer && withReply && p.reads > 0 && int(p.dropped.Load()) >= p.n &&
				bytes.HasPrefix(fields[1], []byte("$JS.API.STREAM.MSG.GET.")) && bytes.Contains(payload, []byte(p.subject)) {
				p.reads--
				p.replies[string(fields[2])] = false
			}
			drop := false
			if answered, ok := p.replies[string(fields[1])]; !toServer && (op == "MSG" || op == "HMSG") && ok && !answered {
				p.replies[string(fields[1])] = true
				p.dropped.Add(1)
				drop = true
			}
			p.mu.Unlock()
			if drop {
				continue
			}
		}
		if _, err := dst.Write(append(line, payload...)); err != nil {
			return
		}
	}
}

// The stream stores a ListChanged but its PubAck is lost: the connector's publish fails after
// its timeout and it never learned the event's sequence. Its re-list then answered only the
// ListChanged events it knew of (none), so a spurious notification left the server's tools
// stale, refused, in every consumer until the next notification or a real change. The re-list
// must answer the ListChanged the stream holds: learned from the publish made again under the
// same Nats-Msg-Id (one PubAck lost), or read back from the stream when that one's is lost too.
func TestListChangedWhoseAckWasLostIsAnswered(t *testing.T) {
	t.Parallel()
	for _, lost := range []int{1, 2} {
		t.Run("lost="+strconv.Itoa(lost), func(t *testing.T) {
			t.Parallel()
			env := natstest.Start(t)
			p := startAckDropProxy(t, env.Server.Inner().Addr().String(), subjects.RegistryChanged("fx", subjects.KindTools), lost)
			srv := newFixture(fixtureOptions{})
			// Each lost PubAck is waited for publishWait: 2 s here, not publishTimeout.
			h, _ := runViaWith(t, env, "nats://"+p.ln.Addr().String(), fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}}),
				func(m *Manager) { m.publishWait = 2 * time.Second })
			rec := record(t, h.env, subjects.RegistryServer("fx"))
			ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))

			srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
			changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
			ans := answered(rec, changed.seq)
			if n := p.dropped.Load(); n != int32(lost) {
				t.Errorf("%d PubAcks dropped, want %d", n, lost)
			}
			if got := replayed(rec); got.State == staleness.Stale {
				t.Errorf("after the answer %s: %s (%s), want no longer stale", ans, got.State, got.Reason)
			}
			for _, e := range rec.all() {
				if e.ev.ListChanged != nil && e.seq != changed.seq {
					t.Errorf("list_changed stored twice: #%d and #%d", changed.seq, e.seq)
				}
			}
		})
	}
}

// A connector drops a list a notification overtook, and publishes the fourth such list in a
// row anyway. The notification that came during that forced list had no ListChanged of its
// own (one still waited for its answer), and the unchanged forced list answered the waiting
// one: consumers made the tools fresh again on a list that may predate the change, before any
// list that began after the notification. They must stay stale until such a list.
//
// The same holds when the forced list changed: its snapshot lifts every ListChanged before it,
// so the notification that came during it needs one after it.
func TestForcedListKeepsLaterNotificationStale(t *testing.T) {
	t.Parallel()
	for _, changes := range []bool{false, true} {
		t.Run("changed="+strconv.FormatBool(changes), func(t *testing.T) {
			t.Parallel()
			forcedListStale(t, changes)
		})
	}
}

func forcedListStale(t *testing.T, changes bool) {
	var (
		overtake atomic.Int32                  // lists still to overtake with a notification
		gate     atomic.Pointer[chan struct{}] // the next list not overtaken waits on it
		began    = make(chan struct{}, 1)
		conn     atomic.Pointer[connector]
		srv      *server.MCPServer
	)
	hooks := &server.Hooks{}
	hooks.AddBeforeListTools(func(context.Context, any, *mcp.ListToolsRequest) {
		c := conn.Load()
		if c == nil {
			return
		}
		if overtake.Load() > 0 {
			if overtake.Add(-1) == 0 && changes {
				// The forced list finds a tool more than the stream's.
				srv.AddTool(mcp.NewTool("added"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("ok"), nil
				})
			}
			gen := c.generation(subjects.KindTools)
			srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
			// The list ends once the connector has seen the notification and its notifier has
			// handled it (stored or left out its ListChanged, scheduled the re-list).
			deadline := time.Now().Add(waitLimit)
			for time.Now().Before(deadline) {
				c.mu.Lock()
				_, pending := c.pending[subjects.KindTools]
				seen := c.gen[subjects.KindTools] > gen && !c.changed[subjects.KindTools] && pending
				c.mu.Unlock()
				if seen {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("the connector did not handle the notification sent during a list")
			return
		}
		if g := gate.Swap(nil); g != nil {
			began <- struct{}{}
			<-*g
		}
	})
	srv = server.NewMCPServer("fx", "1", server.WithToolCapabilities(true), server.WithHooks(hooks))
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: httpFixture(t, srv), Kinds: []string{"tools"}}))
	rec := record(t, h.env, subjects.RegistryServer("fx"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	h.m.mu.Lock()
	conn.Store(h.m.conns["fx"])
	h.m.mu.Unlock()

	// Three lists dropped, the fourth forced: each overtaken by a notification.
	overtake.Store(maxSkips + 1)
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // a failed test does not leave the list waiting
	gate.Store(&release)
	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(ready.seq, "list_changed", isChanged(subjects.KindTools))
	select {
	case <-began:
	case <-time.After(waitLimit):
		t.Fatalf("no list after the overtaken ones")
	}
	// The first list that began after the last notification has not ended: every consumer
	// still holds the tools stale.
	last := lastSeq(t, h.env, subjects.RegistryServer("fx"))
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	if got := replayed(rec); got.State != staleness.Stale {
		var b bytes.Buffer
		for _, e := range rec.all() {
			if e.seq >= changed.seq {
				b.WriteString("\n  " + e.String() + " " + string(e.data))
			}
		}
		t.Errorf("before any list that began after the last notification ended: %s, want stale; events:%s", got.State, b.String())
	}
	open()
	waitUntil(t, "the tools fresh again after that list", func() bool {
		return replayed(rec).State != staleness.Stale
	})
}
