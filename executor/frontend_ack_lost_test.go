package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// ackCutter is a loopback TCP proxy to a NATS server that drops the connection once, at the
// first message from the server holding a PubAck of stream: the message is stored, and its
// publisher never learns it (as when NATS restarts under it). With dead, the proxy then refuses
// every connection: its client is as good as killed.
type ackCutter struct {
	ln     net.Listener
	stream string
	dead   bool
	cut    atomic.Bool
	wg     sync.WaitGroup
}

func startAckCutter(t *testing.T, target, stream string, dead bool) *ackCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ackCutter{ln: ln, stream: stream, dead: dead}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.dead && p.cut.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
			go func() {
				defer p.wg.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if !p.cut.Load() && bytes.Contains(buf[:n], []byte(`"stream":"`+p.stream+`"`)) && p.cut.CompareAndSwap(false, true) {
							s.Close()
							return
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
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
	t.Cleanup(func() { ln.Close() })
	return p
}

// TestFrontEndAckLost: the front end persists a request and loses its PubAck (its connection
// dropped under it): the request is stored and runs. The front end answered it refused /
// unavailable ("could not be persisted"), saying that nothing ran, while the side-effecting call
// ran and its stored answer is ok. A caller answered by the front end (a reply subject outside
// _INBOX.) got that refusal as its answer.
func TestFrontEndAckLost(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigOptions{noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	p := startAckCutter(t, r.env.Server.Inner().Addr().String(), subjects.CallsStream, false)
	enc, err := nats.Connect("nats://"+p.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(enc.Close)
	// (A call delivered in the chunk the proxy drops is delivered again after AckWait.)
	r.startExecutor(Config{Dispatcher: r.mgr, Relister: r.mgr, AckWait: 3 * time.Second}, enc)
	r.waitTool("ticketing__createIssue")

	// A caller whose inbox is not under _INBOX.: the front end answers it.
	cnc, err := nats.Connect(r.env.URL, nats.CustomInboxPrefix("_CALLER"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	c := Client{NC: cnc}
	res, err := c.Call(ctx, "local", subjects.CallRequest{ID: "fe-ack-lost", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if !p.cut.Load() {
		t.Fatal("the proxy never saw the request's PubAck")
	}
	stored, err := r.client.Await(ctx, "local", "fe-ack-lost")
	if err != nil {
		t.Fatalf("Await: %v", err)
	}
	if res.Status != stored.Status || (res.Error == nil) != (stored.Error == nil) ||
		res.Error != nil && res.Error.Code != stored.Error.Code {
		t.Errorf("the front end answered %s %+v; the stored answer is %s %+v", res.Status, res.Error, stored.Status, stored.Error)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	// Its own first publish is no resend: the answer is not marked duplicate.
	if res.Duplicate {
		t.Errorf("the answer of the only send is marked duplicate")
	}
}
