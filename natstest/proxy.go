package natstest

import (
	"net"
	"sync"
	"testing"
)

// PausableProxy forwards TCP between clients and a NATS server (on loopback); while paused it
// forwards nothing either way (the bytes wait, as in the socket buffers of a SIGSTOPped
// process, or a connection stalled by a partition that TCP has not noticed yet).
type PausableProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

// NewPausableProxy listens on 127.0.0.1 and forwards each connection to target (host:port);
// it stops, resumed, with the test.
func NewPausableProxy(t testing.TB, target string) *PausableProxy {
	t.Helper()
	p := &PausableProxy{}
	p.cond = sync.NewCond(&p.mu)
	p.ln = Forward(t, target,
		func(client, srv net.Conn) { p.pipe(client, srv) },
		func(client, srv net.Conn) { p.pipe(srv, client) })
	t.Cleanup(p.Resume) // (before Forward's cleanup, which waits for the pipes: cleanups run last first)
	return p
}

// Forward listens on 127.0.0.1 and connects each client it accepts to target (host:port): back
// copies what the server sends to the client, forward what the client sends to the server (a
// test's proxy decides what passes, and when), each in its own goroutine; the connection's
// receiving side is closed when either returns. Every connection is closed, and the goroutines
// waited for, when the test ends.
func Forward(t testing.TB, target string, back, forward func(client, srv net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			open = append(open, client, srv)
			mu.Unlock()
			wg.Go(func() { back(client, srv); client.Close() })
			wg.Go(func() { forward(client, srv); srv.Close() })
		}
	})
	return ln
}

func (p *PausableProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.paused {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// URL is the proxy's nats:// URL.
func (p *PausableProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Pause holds every byte either way until Resume.
func (p *PausableProxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume forwards again what Pause held, and what comes.
func (p *PausableProxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
