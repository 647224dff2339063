package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// dropProxy is a loopback TCP proxy for one NATS client that drops the client's first publish
// to subject, and only it: the connection stays up, the server never sees that message, and no
// PubAck comes — as when a publish reaches a node that forwards it to a stream leader dying
// under it (seen in the 3-node failover test).
type dropProxy struct {
	ln      net.Listener
	subject string
	dropped atomic.Int32
	mu      sync.Mutex
	conns   []net.Conn
}

func startDropProxy(t *testing.T, target, subject string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, subject: subject}
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
			go func() { io.Copy(c, s); c.Close() }()
			go func() { p.forward(s, c); s.Close() }()
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

// forward copies the client's protocol to the server frame by frame, leaving out the first
// PUB or HPUB to p.subject (its control line and payload).
func (p *dropProxy) forward(dst io.Writer, src io.Reader) {
	r := bufio.NewReader(src)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		fields := bytes.Fields(line)
		var payload []byte
		if len(fields) >= 3 && (string(fields[0]) == "PUB" || string(fields[0]) == "HPUB") {
			n, err := strconv.Atoi(string(fields[len(fields)-1]))
			if err != nil {
				return
			}
			payload = make([]byte, n+2) // and its \r\n
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			if string(fields[1]) == p.subject && p.dropped.CompareAndSwap(0, 1) {
				continue
			}
		}
		if _, err := dst.Write(append(line, payload...)); err != nil {
			return
		}
	}
}

// TestCallDirectLostPublish: CallDirect's request never reaches the calls stream and no PubAck
// or error comes back, on a connection that stays up, through a JetStream context made without
// an async publish timeout (jetstream.New(nc), as callers do). CallDirect waited for that PubAck
// until its caller's deadline, and the call never ran: in the 3-node failover test, a call
// published as its stream's leader died got no answer in 30 s. Past PubAckWait the request is
// published again under the same id; it runs once and is answered.
func TestCallDirectLostPublish(t *testing.T) {
	r := startRig(t, rigOptions{})
	p := startDropProxy(t, r.env.Server.Inner().Addr().String(), subjects.Calls("local"))
	nc, err := nats.Connect("nats://" + p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := Client{NC: nc, JS: js, PubAckWait: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallDirect(ctx, "local", subjects.CallRequest{ID: "lost-publish", Tool: "ticketing__createIssue",
		Arguments: json.RawMessage(`{"title":"once","body":"b","priority":"low"}`)})
	if p.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped no publish")
	}
	if err != nil {
		t.Fatalf("CallDirect after a lost publish: %v", err)
	}
	if res.Status != subjects.CallOK || res.Error != nil || res.Duplicate {
		t.Errorf("answer %s %+v (duplicate %v), want ok", res.Status, res.Error, res.Duplicate)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}
