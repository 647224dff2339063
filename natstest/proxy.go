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
	conns  []net.Conn
}

// NewPausableProxy listens on 127.0.0.1 and forwards each connection to target (host:port);
// it stops, resumed, with the test.
func NewPausableProxy(t testing.TB, target string) *PausableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &PausableProxy{ln: ln}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.Resume()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
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
			wg.Go(func() { p.pipe(s, c) })
			wg.Go(func() { p.pipe(c, s) })
		}
	})
	return p
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
