package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// failoverProxy is a loopback TCP proxy for one NATS client: it drops the connection at the first
// PubAck of stream (the request is stored on the first server, its publisher never learns it)
// and sends the client's reconnection to a second NATS server without JetStream, as a client of
// a cluster reconnects to a node whose JetStream is not up yet: a publish there is answered "no
// responders", a refusal that stored nothing — of that publish. Once that server answered 503
// to the request and to each of nats.go's retries of it, the proxy sends the client back to the first server.
type failoverProxy struct {
	ln           net.Listener
	stream       string
	first, spare string
	phase        atomic.Int32 // 0: first until the PubAck, 1: spare until a 503, 2: first again
	published    atomic.Int32 // publishes of the request to the spare server (nats.go retries "no responders")
	mu           sync.Mutex
	conns        []net.Conn
}

func startFailoverProxy(t *testing.T, first, spare, stream string) *failoverProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &failoverProxy{ln: ln, stream: stream, first: first, spare: spare}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			phase := p.phase.Load()
			target := p.first
			if phase == 1 {
				target = p.spare
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() {
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if phase == 1 && bytes.Contains(buf[:n], []byte("PUB "+subjects.Calls("local")+" ")) {
							p.published.Add(1)
						}
						if _, werr := s.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						chunk := buf[:n]
						if phase == 0 && bytes.Contains(chunk, []byte(`"stream":"`+p.stream+`"`)) && p.phase.CompareAndSwap(0, 1) {
							p.closeAll()
							return
						}
						if _, werr := c.Write(chunk); werr != nil {
							return
						}
						if phase == 1 && p.published.Load() > jetstream.DefaultPubRetryAttempts && bytes.Contains(chunk, []byte("NATS/1.0 503")) && p.phase.CompareAndSwap(1, 2) {
							p.closeAll()
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	return p
}

func (p *failoverProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// startPlainNATS starts a NATS server without JetStream on loopback.
func startPlainNATS(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("plain NATS server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.Addr().String()
}

// TestCallDirectRepublishRefused: CallDirect's request is stored and its PubAck lost (the
// connection dropped); published again after its client reconnected to a node where no stream
// answers, the republish is refused "no responders". That refusal is of the republish only:
// the first publish is stored and runs. CallDirect answered refused / unavailable — nothing ran —
// while the side-effecting call ran and its stored answer is ok.
func TestCallDirectRepublishRefused(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	p := startFailoverProxy(t, r.env.Server.Inner().Addr().String(), startPlainNATS(t), subjects.CallsStream)
	nc, err := nats.Connect("nats://"+p.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := Client{NC: nc, JS: js}
	res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "republish-refused", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if err != nil {
		t.Fatalf("CallDirect: %v", err)
	}
	if p.phase.Load() != 2 {
		t.Fatalf("the republish never reached the node without JetStream (phase %d)", p.phase.Load())
	}
	stored, err := r.client.Await(ctx, "local", "republish-refused")
	if err != nil {
		t.Fatalf("Await: %v", err)
	}
	if res.Status != stored.Status || (res.Error == nil) != (stored.Error == nil) ||
		res.Error != nil && res.Error.Code != stored.Error.Code {
		t.Errorf("CallDirect answered %s %+v; the stored answer is %s %+v", res.Status, res.Error, stored.Status, stored.Error)
	}
	if res.Duplicate {
		t.Errorf("the answer of the call's own request is marked duplicate")
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

// TestFrontEndRepublishRefused: the front end persists a request, loses its PubAck (stored),
// and publishes it again on a node where no stream answers. persist returned that refusal, and
// the front end answered refused / unavailable — nothing ran — though the request is stored
// and runs.
func TestFrontEndRepublishRefused(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	p := startFailoverProxy(t, r.env.Server.Inner().Addr().String(), startPlainNATS(t), subjects.CallsStream)
	nc, err := nats.Connect("nats://"+p.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{js: js, stopping: make(chan struct{})}
	pub := &nats.Msg{Subject: subjects.Calls("local"), Header: nats.Header{},
		Data: []byte(`{"v":1,"id":"fe-republish-refused","tool":"ticketing__createIssue","arguments":{}}`)}
	pub.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID("local", "fe-republish-refused"))
	_, _, perr := e.persist(pub)
	calls, err := r.env.JS.Stream(ctx, subjects.CallsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := calls.GetLastMsgForSubject(ctx, subjects.Calls("local")); err != nil {
		t.Fatalf("the request is not stored (%v); persist: %v", err, perr)
	}
	if p.phase.Load() == 0 {
		t.Fatal("the proxy never saw the request's PubAck")
	}
	if perr != nil && publishRefused(perr) {
		t.Errorf("persist answered a refusal (%v), which the front end answers refused: the request is stored and runs", perr)
	}
}
